// The collective, point-to-point, group and memory entry points of nccl.h.
// Outside a group a collective is issued at once (no allocation: the shim's
// cost per call stays a few checks); inside one it is recorded.
#include <cuda_runtime.h>

#include <cstring>
#include <utility>

#include "api_util.hpp"
#include "group.hpp"
#include "plugboard/logger.hpp"
#include "plugboard/gpu/collectives.hpp"

using namespace plugboard;
using namespace plugboard::ncclapi;

namespace plugboard::ncclapi {

CallArgs checkCall(const ncclComm* comm, size_t count, int ncclType, const int* ncclOp, int rootOrPeer,
                   const char* rootName) {
  requireComm(comm);
  CallArgs a;
  const auto type = toDataType(ncclType);
  if (!type) throw ApiFailure(Result::InvalidArgument, "datatype " + std::to_string(ncclType) + " is not an ncclDataType_t");
  a.type = *type;
  if (ncclOp) {
    if (const auto op = toReduceOp(*ncclOp)) {
      a.op = *op;
    } else if (auto preMul = comm->preMulOps.find(*ncclOp)) {
      if (preMul->type != a.type)
        throw ApiFailure(Result::InvalidArgument,
                         "reduction op " + std::to_string(*ncclOp) + " is a PreMulSum op made for " +
                             dataTypeName(preMul->type) + ", and this call's datatype is " + dataTypeName(a.type));
      a.op = ReduceOp::Sum;
      a.preMul = preMul;
    } else {
      throw ApiFailure(Result::InvalidArgument, "reduction op " + std::to_string(*ncclOp) +
                                                    " is neither ncclSum/Prod/Max/Min/Avg nor a PreMulSum op alive on "
                                                    "this communicator");
    }
  }
  const auto bytes = byteCount(count, a.type);
  if (!bytes) throw ApiFailure(Result::InvalidArgument, "count " + std::to_string(count) + " overflows size_t in bytes");
  a.bytes = *bytes;
  if (rootName && (rootOrPeer < 0 || rootOrPeer >= comm->size()))
    throw ApiFailure(Result::InvalidArgument, std::string(rootName) + " " + std::to_string(rootOrPeer) +
                                                  " is out of range [0, " + std::to_string(comm->size()) + ")");
  return a;
}

void requireBuffer(const void* p, const char* name, size_t count) {
  if (!p && count > 0) throw ApiFailure(Result::InvalidArgument, std::string(name) + " is NULL with count " + std::to_string(count));
}

CallArgs checkSymmetric(const ncclComm* comm, size_t count, int ncclType, const int* ncclOp, const void* send,
                        const void* recv) {
  const CallArgs a = checkCall(comm, count, ncclType, ncclOp, 0, nullptr);
  requireBuffer(send, "sendbuff", count);
  requireBuffer(recv, "recvbuff", count);
  return a;
}

}  // namespace plugboard::ncclapi

namespace {

/// Issues `call` on comm now, or records it for the open group's end.
template <typename Call>
void issueOrDefer(ncclComm* comm, cudaStream_t stream, Call&& call) {
  Group& g = Group::current();
  if (g.open()) {
    g.collectives.push_back([comm, stream, call = std::forward<Call>(call)] { comm->issue(stream, call); });
    return;
  }
  comm->issue(stream, call);
}

/// Runs call (a call of the real NCCL) now, or records it for the open
/// group's end, which then runs inside a real NCCL group.
template <typename Call>
void forwardOrDefer(const RealNcclComm* real, Call&& call) {
  Group& g = Group::current();
  if (g.open()) {
    g.realApi = &real->api();
    g.collectives.push_back(std::forward<Call>(call));
    return;
  }
  call();
}

/// The core's form of a PreMulSum op's scalar.
PreMulScalar scalarOf(const PreMulSum& op) {
  PreMulScalar s;
  s.device = op.scalarOnDevice ? op.deviceScalar : nullptr;
  s.hostValue = op.hostValue;
  return s;
}

/// Queues dst = op's scalar x src, count elements: what a call handed to the
/// real NCCL sums (the core's own calls scale as they reduce).
void preMulScale(void* dst, const void* src, size_t count, const PreMulSum& op, cudaStream_t stream) {
  plugboard::preMulScale(dst, src, count, op.type, scalarOf(op), stream);
}

/// Runs body(scaled) with scaled = a stream-ordered scratch copy of src x
/// op's scalar (count elements of `bytes` in all), freed after body's work
/// on the stream (graph-capturable: cudaMallocAsync / cudaFreeAsync).
template <typename Body>
void withScaledCopy(const void* src, size_t count, size_t bytes, const PreMulSum& op, cudaStream_t stream,
                    Body&& body) {
  void* scaled = nullptr;
  cudaError_t e = cudaMallocAsync(&scaled, bytes ? bytes : 1, stream);
  if (e != cudaSuccess)
    throw ApiFailure(Result::UnhandledCudaError, "PreMulSum scratch of " + std::to_string(bytes) +
                                                     " bytes: cudaMallocAsync: " + cudaGetErrorString(e));
  try {
    preMulScale(scaled, src, count, op, stream);
    body(static_cast<const void*>(scaled));
  } catch (...) {
    cudaFreeAsync(scaled, stream);
    throw;
  }
  e = cudaFreeAsync(scaled, stream);
  if (e != cudaSuccess)
    throw ApiFailure(Result::UnhandledCudaError, std::string("PreMulSum scratch: cudaFreeAsync: ") + cudaGetErrorString(e));
}

/// ncclAlltoAll on the real NCCL: its own where it has one (2.28 and later),
/// else a real group of a send and a receive per peer. bytes: one block.
void forwardAllToAll(const RealNcclComm& real, const void* send, void* recv, size_t count, int datatype, size_t bytes,
                     int nranks, cudaStream_t stream) {
  const NcclApi& api = real.api();
  if (api.allToAll) return real.check(api.allToAll(send, recv, count, datatype, real.comm(), stream), "ncclAlltoAll");
  if (send == recv && count > 0)  // a receive would overwrite a block not yet sent
    throw ApiFailure(Result::InvalidUsage, "an in-place alltoall handed to the real NCCL needs its ncclAlltoAll (NCCL "
                                           "2.28 or later); this one has none");
  RealNcclGroup group(&api);
  for (int p = 0; p < nranks; ++p) {
    const size_t at = bytes * static_cast<size_t>(p);
    real.check(api.send(static_cast<const char*>(send) + at, count, datatype, p, real.comm(), stream),
               "ncclAlltoAll (as sends and receives)");
    real.check(api.recv(static_cast<char*>(recv) + at, count, datatype, p, real.comm(), stream),
               "ncclAlltoAll (as sends and receives)");
  }
  group.end();
}

/// Records a send or receive; outside a group it is a group of one.
void recordP2P(ncclComm* comm, bool isSend, void* buf, size_t bytes, int peer, cudaStream_t stream) {
  Group& g = Group::current();
  if (g.open()) {
    g.p2p.push_back({comm, isSend, buf, bytes, peer, stream});
    return;
  }
  issueP2P(comm, {{comm, isSend, buf, bytes, peer, stream}});
}

}  // namespace

PB_NCCL_API ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAllReduce", [&] {
    const int o = op;
    const CallArgs a = checkSymmetric(comm, count, datatype, &o, sendbuff, recvbuff);
    if (const RealNcclComm* real = comm->forwards(FallbackCall::AllReduce))
      return forwardOrDefer(real, [=] {
        if (!a.preMul)
          return real->check(real->api().allReduce(sendbuff, recvbuff, count, datatype, op, real->comm(), stream),
                             "ncclAllReduce");
        preMulScale(recvbuff, sendbuff, count, *a.preMul, stream);  // the real NCCL sums the scaled values
        real->check(real->api().allReduce(recvbuff, recvbuff, count, datatype, ncclSum, real->comm(), stream),
                    "ncclAllReduce");
      });
    issueOrDefer(comm, stream, [=] {
      if (!a.preMul) return comm->gpu->allReduce(sendbuff, recvbuff, count, a.type, a.op, stream);
      comm->gpu->allReduce(sendbuff, recvbuff, count, a.type, scalarOf(*a.preMul), stream);
    });
  });
}

PB_NCCL_API ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclBroadcast", [&] {
    const CallArgs a = checkCall(comm, count, datatype, nullptr, root, "root");
    if (comm->rank() == root) requireBuffer(sendbuff, "sendbuff", count);
    requireBuffer(recvbuff, "recvbuff", count);
    if (const RealNcclComm* real = comm->forwards(FallbackCall::Broadcast))
      return forwardOrDefer(real, [=] {
        real->check(real->api().broadcast(sendbuff, recvbuff, count, datatype, root, real->comm(), stream),
                    "ncclBroadcast");
      });
    issueOrDefer(comm, stream, [=] { comm->gpu->broadcast(sendbuff, recvbuff, count, a.type, root, stream); });
  });
}

PB_NCCL_API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

PB_NCCL_API ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclReduce", [&] {
    const int o = op;
    const CallArgs a = checkCall(comm, count, datatype, &o, root, "root");
    requireBuffer(sendbuff, "sendbuff", count);
    if (comm->rank() == root) requireBuffer(recvbuff, "recvbuff", count);
    if (const RealNcclComm* real = comm->forwards(FallbackCall::Reduce))
      return forwardOrDefer(real, [=] {
        auto call = [&](const void* src, int realOp) {
          real->check(real->api().reduce(src, recvbuff, count, datatype, realOp, root, real->comm(), stream), "ncclReduce");
        };
        if (!a.preMul) return call(sendbuff, op);
        withScaledCopy(sendbuff, count, a.bytes, *a.preMul, stream, [&](const void* scaled) { call(scaled, ncclSum); });
      });
    issueOrDefer(comm, stream, [=] {
      if (!a.preMul) return comm->gpu->reduce(sendbuff, recvbuff, count, a.type, a.op, root, stream);
      comm->gpu->reduce(sendbuff, recvbuff, count, a.type, scalarOf(*a.preMul), root, stream);
    });
  });
}

PB_NCCL_API ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                       ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAllGather", [&] {
    const CallArgs a = checkSymmetric(comm, sendcount, datatype, nullptr, sendbuff, recvbuff);
    if (const RealNcclComm* real = comm->forwards(FallbackCall::AllGather))
      return forwardOrDefer(real, [=] {
        real->check(real->api().allGather(sendbuff, recvbuff, sendcount, datatype, real->comm(), stream),
                    "ncclAllGather");
      });
    issueOrDefer(comm, stream, [=] { comm->gpu->allGather(sendbuff, recvbuff, sendcount, a.type, stream); });
  });
}

PB_NCCL_API ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  return guarded("ncclReduceScatter", [&] {
    const int o = op;
    const CallArgs a = checkSymmetric(comm, recvcount, datatype, &o, sendbuff, recvbuff);
    if (const RealNcclComm* real = comm->forwards(FallbackCall::ReduceScatter))
      return forwardOrDefer(real, [=] {
        auto call = [&](const void* src, int realOp) {
          real->check(real->api().reduceScatter(src, recvbuff, recvcount, datatype, realOp, real->comm(), stream),
                      "ncclReduceScatter");
        };
        if (!a.preMul) return call(sendbuff, op);
        const size_t n = static_cast<size_t>(comm->size());
        withScaledCopy(sendbuff, recvcount * n, a.bytes * n, *a.preMul, stream,
                       [&](const void* scaled) { call(scaled, ncclSum); });
      });
    issueOrDefer(comm, stream, [=] {
      if (!a.preMul) return comm->gpu->reduceScatter(sendbuff, recvbuff, recvcount, a.type, a.op, stream);
      comm->gpu->reduceScatter(sendbuff, recvbuff, recvcount, a.type, scalarOf(*a.preMul), stream);
    });
  });
}

PB_NCCL_API ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAlltoAll", [&] {
    const CallArgs a = checkSymmetric(comm, count, datatype, nullptr, sendbuff, recvbuff);
    if (const RealNcclComm* real = comm->forwards(FallbackCall::AllToAll))
      return forwardOrDefer(real, [=] {
        forwardAllToAll(*real, sendbuff, recvbuff, count, datatype, a.bytes, comm->size(), stream);
      });
    issueOrDefer(comm, stream, [=] { comm->gpu->allToAll(sendbuff, recvbuff, count, a.type, stream); });
  });
}

PB_NCCL_API ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclSend", [&] {
    const CallArgs a = checkCall(comm, count, datatype, nullptr, peer, "peer");
    requireBuffer(sendbuff, "sendbuff", count);
    recordP2P(comm, true, const_cast<void*>(sendbuff), a.bytes, peer, stream);
  });
}

PB_NCCL_API ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                  cudaStream_t stream) {
  return guarded("ncclRecv", [&] {
    const CallArgs a = checkCall(comm, count, datatype, nullptr, peer, "peer");
    requireBuffer(recvbuff, "recvbuff", count);
    recordP2P(comm, false, recvbuff, a.bytes, peer, stream);
  });
}

PB_NCCL_API ncclResult_t ncclGroupStart(void) {
  return guarded("ncclGroupStart", [] { ++Group::current().depth; });
}

// Non-blocking inits of the group (config.blocking = 0) start here on
// threads of their own: ncclInProgress, and ncclCommGetAsyncError on each
// new communicator says when it is ready.
PB_NCCL_API ncclResult_t ncclGroupEnd(void) {
  bool pending = false;
  const ncclResult_t r = guarded("ncclGroupEnd", [&] {
    Group& g = Group::current();
    if (g.depth == 0) throw ApiFailure(Result::InvalidUsage, "no group is open (ncclGroupEnd without ncclGroupStart)");
    if (--g.depth == 0) pending = g.issue();
  });
  return r == ncclSuccess && pending ? ncclInProgress : r;
}

PB_NCCL_API ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  return guarded("ncclMemAlloc", [&] {
    requireArg(ptr, "ptr");
    const cudaError_t e = cudaMalloc(ptr, size);
    if (e != cudaSuccess)
      throw ApiFailure(Result::UnhandledCudaError, "cudaMalloc of " + std::to_string(size) + " bytes: " + cudaGetErrorString(e));
  });
}

PB_NCCL_API ncclResult_t ncclMemFree(void* ptr) {
  return guarded("ncclMemFree", [&] {
    const cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess) throw ApiFailure(Result::UnhandledCudaError, std::string("cudaFree: ") + cudaGetErrorString(e));
  });
}

namespace {
/// What ncclCommRegister hands out: the range, for messages.
struct Registration {
  void* buff;
  size_t size;
};
}  // namespace

PB_NCCL_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("ncclCommRegister", [&] {
    requireComm(comm);
    requireArg(handle, "handle");
    *handle = new Registration{buff, size};
  });
}

PB_NCCL_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return guarded("ncclCommDeregister", [&] {
    requireComm(comm);
    requireArg(handle, "handle");
    delete static_cast<Registration*>(handle);
  });
}

PB_NCCL_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence, ncclComm_t comm) {
  return guarded("ncclRedOpCreatePreMulSum", [&] {
    requireComm(comm);
    requireArg(op, "op");
    requireArg(scalar, "scalar");
    const auto type = toDataType(datatype);
    if (!type) throw ApiFailure(Result::InvalidArgument, "datatype " + std::to_string(datatype) + " is not an ncclDataType_t");
    if (*type == DataType::Float8E4M3 || *type == DataType::Float8E5M2)
      throw ApiFailure(Result::InvalidArgument, std::string("PreMulSum of ") + dataTypeName(*type) + " is not served");
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
      throw ApiFailure(Result::InvalidArgument, "residence " + std::to_string(residence) +
                                                    " is neither ncclScalarDevice nor ncclScalarHostImmediate");
    PreMulSum made;
    made.type = *type;
    made.scalarOnDevice = residence == ncclScalarDevice;
    if (made.scalarOnDevice)
      made.deviceScalar = scalar;  // read by each call's kernel: must stay valid until ncclRedOpDestroy (NCCL's rule)
    else
      std::memcpy(made.hostValue.data(), scalar, dataTypeSize(*type));
    const auto id = comm->preMulOps.add(made);
    if (!id)
      throw ApiFailure(Result::InvalidUsage, std::to_string(PreMulSumOps::kMaxOps) +
                                                 " PreMulSum ops are alive on this communicator; destroy some first");
    *op = static_cast<ncclRedOp_t>(*id);
  });
}

PB_NCCL_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return guarded("ncclRedOpDestroy", [&] {
    requireComm(comm);
    const int id = static_cast<int>(op);
    if (toReduceOp(id))
      throw ApiFailure(Result::InvalidArgument, "op " + std::to_string(id) + " is a built-in op, not one made by "
                                                                            "ncclRedOpCreatePreMulSum");
    if (!comm->preMulOps.remove(id))
      throw ApiFailure(Result::InvalidArgument, "op " + std::to_string(id) + " is not a PreMulSum op alive on this "
                                                                            "communicator (never made, or destroyed)");
  });
}

namespace {
/// An entry point of a newer NCCL that this library does not serve.
ncclResult_t notServed(const char* call, const char* what) {
  return guarded(call, [what] {
    throw ApiFailure(Result::InvalidUsage, std::string(what) + " are not served by Plugboard's NCCL API library");
  });
}
}  // namespace

PB_NCCL_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                 int winFlags) {
  return guarded("ncclCommWindowRegister", [&] {
    requireComm(comm);
    requireArg(win, "win");
    if (size > 0) requireArg(buff, "buff");
    if (winFlags & ~(NCCL_WIN_DEFAULT | NCCL_WIN_COLL_SYMMETRIC))
      throw ApiFailure(Result::InvalidArgument, "winFlags " + std::to_string(winFlags) +
                                                    " has bits other than NCCL_WIN_COLL_SYMMETRIC");
    if (!std::exchange(comm->windowsLogged, true))
      PB_LOG(Info, "NCCL", "rank " << comm->rank() << ": ncclCommWindowRegister accepted; Plugboard's collectives copy "
                                   "through their own scratch and need no registration, so windows change nothing");
    auto window = std::make_unique<ncclWindow_vidmem>(ncclWindow_vidmem{buff, size, winFlags});
    *win = window.get();
    comm->windows.emplace(window.get(), std::move(window));
  });
}

PB_NCCL_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return guarded("ncclCommWindowDeregister", [&] {
    requireComm(comm);
    requireArg(win, "win");
    if (comm->windows.erase(win) == 0)
      throw ApiFailure(Result::InvalidArgument, "win is not a window registered on this communicator (never, or "
                                                "deregistered already)");
  });
}

PB_NCCL_API ncclResult_t ncclDevCommCreate(ncclComm_t, const void*, void*) {
  return notServed("ncclDevCommCreate", "NCCL device-API communicators");
}

PB_NCCL_API ncclResult_t ncclDevCommDestroy(ncclComm_t, const void*) {
  return notServed("ncclDevCommDestroy", "NCCL device-API communicators");
}

PB_NCCL_API ncclResult_t ncclGroupSimulateEnd(void*) { return notServed("ncclGroupSimulateEnd", "group simulations"); }
