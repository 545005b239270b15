#include "nccl_backend.hpp"

#include <cstring>
#include <vector>

#include "plugboard/error.hpp"

namespace plugboard::perf {

int ncclTypeOf(DataType t) {
  switch (t) {
    case DataType::Int8: return nccl::Int8;
    case DataType::Uint8: return nccl::Uint8;
    case DataType::Int32: return nccl::Int32;
    case DataType::Uint32: return nccl::Uint32;
    case DataType::Int64: return nccl::Int64;
    case DataType::Uint64: return nccl::Uint64;
    case DataType::Float16: return nccl::Float16;
    case DataType::BFloat16: return nccl::BFloat16;
    case DataType::Float32: return nccl::Float32;
    case DataType::Float64: return nccl::Float64;
    case DataType::Float8E4M3: return nccl::Float8E4M3;  // NCCL 2.24 and later
    case DataType::Float8E5M2: return nccl::Float8E5M2;
  }
  throw Error(ErrorCode::InvalidUsage, "no NCCL type for this data type");
}

int ncclOpOf(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return nccl::Sum;
    case ReduceOp::Prod: return nccl::Prod;
    case ReduceOp::Min: return nccl::Min;
    case ReduceOp::Max: return nccl::Max;
    case ReduceOp::Avg: return nccl::Avg;
  }
  throw Error(ErrorCode::InvalidUsage, "no NCCL op for this reduce op");
}

NcclBackend::NcclBackend(std::shared_ptr<NcclLibrary> lib, Bootstrap& boot, bool symmetric)
    : lib_(std::move(lib)), symmetric_(symmetric) {
  const NcclApi& a = lib_->api();
  std::vector<nccl::UniqueId> ids(static_cast<size_t>(boot.size()));
  if (boot.rank() == 0) lib_->check(a.getUniqueId(&ids[0]), "ncclGetUniqueId");
  else std::memset(&ids[boot.rank()], 0, sizeof(nccl::UniqueId));
  boot.allGather(ids.data(), sizeof(nccl::UniqueId));  // everyone takes rank 0's slot
  lib_->check(a.commInitRank(&comm_, boot.size(), ids[0], boot.rank()),
              "ncclCommInitRank (rank " + std::to_string(boot.rank()) + " of " + std::to_string(boot.size()) + ")");
}

NcclBackend::~NcclBackend() {
  if (!comm_) return;
  for (const auto& [type, op] : preMulOps_) lib_->api().redOpDestroy(op, comm_);
  lib_->api().commDestroy(comm_);
}

int NcclBackend::preMulOp(DataType type) {
  auto it = preMulOps_.find(type);
  if (it != preMulOps_.end()) return it->second;
  const NcclApi& a = lib_->api();
  if (!a.redOpCreatePreMulSum || !a.redOpDestroy)
    throw Error(ErrorCode::InvalidUsage, "-o premulsum: this NCCL has no ncclRedOpCreatePreMulSum");
  std::array<uint8_t, 8> one = preMulOne(type);
  int op = 0;
  lib_->check(a.redOpCreatePreMulSum(&op, one.data(), ncclTypeOf(type), nccl::kScalarHostImmediate, comm_),
              "ncclRedOpCreatePreMulSum");
  preMulOps_.emplace(type, op);
  return op;
}

std::unique_ptr<DeviceBuffers> NcclBackend::ownBuffers(size_t sendBytes, size_t recvBytes) {
  if (!symmetric_) return nullptr;
  return std::make_unique<NcclWindowBuffers>(lib_, comm_, sendBytes, recvBytes);
}

NcclWindowBuffers::NcclWindowBuffers(std::shared_ptr<NcclLibrary> lib, nccl::Comm comm, size_t sendBytes,
                                     size_t recvBytes)
    : lib_(std::move(lib)), comm_(comm) {
  try {
    take(send_, sendWin_, sendBytes, "send");
    take(recv_, recvWin_, recvBytes, "receive");
  } catch (...) {
    release();
    throw;
  }
}

NcclWindowBuffers::~NcclWindowBuffers() { release(); }

void NcclWindowBuffers::take(char*& ptr, nccl::Window& win, size_t bytes, const char* which) {
  const NcclApi& a = lib_->api();
  void* p = nullptr;
  std::string what = std::string(which) + " buffer of " + std::to_string(bytes) + " bytes";
  lib_->check(a.memAlloc(&p, bytes), "ncclMemAlloc of the " + what);
  ptr = static_cast<char*>(p);
  lib_->check(a.commWindowRegister(comm_, p, bytes, &win, nccl::kWinCollSymmetric),
              "ncclCommWindowRegister (symmetric) of the " + what);
}

void NcclWindowBuffers::release() noexcept {
  const NcclApi& a = lib_->api();
  if (sendWin_) a.commWindowDeregister(comm_, sendWin_);
  if (recvWin_) a.commWindowDeregister(comm_, recvWin_);
  if (send_) a.memFree(send_);
  if (recv_) a.memFree(recv_);
  sendWin_ = recvWin_ = nullptr;
  send_ = recv_ = nullptr;
}

void NcclBackend::run(const Call& c, const CallPointers& p, cudaStream_t s) {
  const NcclApi& a = lib_->api();
  size_t k = c.shape.callCount;
  const bool reduces = c.collective == Collective::AllReduce || c.collective == Collective::ReduceScatter ||
                       c.collective == Collective::Reduce;
  int t = ncclTypeOf(c.type), op = c.preMul && reduces ? preMulOp(c.type) : ncclOpOf(c.op);
  switch (c.collective) {
    case Collective::AllReduce: lib_->check(a.allReduce(p.send, p.result, k, t, op, comm_, s), "ncclAllReduce"); return;
    case Collective::AllGather: lib_->check(a.allGather(p.send, p.result, k, t, comm_, s), "ncclAllGather"); return;
    case Collective::ReduceScatter:
      lib_->check(a.reduceScatter(p.send, p.result, k, t, op, comm_, s), "ncclReduceScatter");
      return;
    case Collective::Broadcast: lib_->check(a.broadcast(p.send, p.result, k, t, c.root, comm_, s), "ncclBroadcast"); return;
    case Collective::Reduce: lib_->check(a.reduce(p.send, p.result, k, t, op, c.root, comm_, s), "ncclReduce"); return;
    case Collective::AllToAll: allToAll(c, p, s); return;
    case Collective::SendRecv: sendRecv(c, p, s); return;
  }
}

void NcclBackend::allToAll(const Call& c, const CallPointers& p, cudaStream_t s) {
  const NcclApi& a = lib_->api();
  size_t k = c.shape.callCount, block = k * dataTypeSize(c.type);
  int t = ncclTypeOf(c.type);
  lib_->check(a.groupStart(), "ncclGroupStart");
  for (int peer = 0; peer < c.nranks; ++peer) {
    lib_->check(a.send(p.send + peer * block, k, t, peer, comm_, s), "ncclSend");
    lib_->check(a.recv(p.result + peer * block, k, t, peer, comm_, s), "ncclRecv");
  }
  lib_->check(a.groupEnd(), "ncclGroupEnd (alltoall)");
}

void NcclBackend::sendRecv(const Call& c, const CallPointers& p, cudaStream_t s) {
  const NcclApi& a = lib_->api();
  size_t k = c.shape.callCount;
  int t = ncclTypeOf(c.type);
  lib_->check(a.groupStart(), "ncclGroupStart");
  lib_->check(a.send(p.send, k, t, (c.rank + 1) % c.nranks, comm_, s), "ncclSend");
  lib_->check(a.recv(p.result, k, t, (c.rank + c.nranks - 1) % c.nranks, comm_, s), "ncclRecv");
  lib_->check(a.groupEnd(), "ncclGroupEnd (sendrecv)");
}

}  // namespace plugboard::perf
