#include "group.hpp"

#include <algorithm>
#include <map>
#include <thread>

#include "nccl_comm.hpp"
#include "nccl_error.hpp"
#include "p2p_schedule.hpp"

namespace plugboard::ncclapi {
namespace {

/// Starts the non-blocking inits (each on its device, on a thread of its
/// own) and removes them from inits; true if there were any.
bool startNonBlockingInits(std::vector<PendingInit>& inits) {
  if (std::none_of(inits.begin(), inits.end(), [](const PendingInit& p) { return p.nonBlocking; })) return false;
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) throw Error(ErrorCode::System, "cudaGetDevice failed");
  bool started = false;
  for (auto it = inits.begin(); it != inits.end();) {
    if (!it->nonBlocking) {
      ++it;
      continue;
    }
    if (cudaSetDevice(it->device) != cudaSuccess)
      throw Error(ErrorCode::System, "cudaSetDevice(" + std::to_string(it->device) + ") failed");
    *it->out = ncclComm::startNonBlocking(it->rank, it->nranks, it->id);
    started = true;
    it = inits.erase(it);
  }
  cudaSetDevice(current);
  return started;
}

/// Runs the inits on one thread each (each on its device), all at once.
void runInits(std::vector<PendingInit>& inits) {
  std::vector<std::exception_ptr> errors(inits.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        const PendingInit& p = inits[i];
        if (cudaSetDevice(p.device) != cudaSuccess)
          throw Error(ErrorCode::System, "cudaSetDevice(" + std::to_string(p.device) + ") failed");
        *p.out = new ncclComm(p.rank, p.nranks, p.id);
      } catch (...) {
        *inits[i].out = nullptr;
        errors[i] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

/// Hands one communicator's sends and receives to the real NCCL, in one real group.
void forwardP2P(const RealNcclComm& real, const std::vector<PendingP2P>& ops) {
  const NcclApi& api = real.api();
  RealNcclGroup group(&api);
  for (const auto& op : ops)
    real.check(op.isSend ? api.send(op.buf, op.bytes, ncclUint8, op.peer, real.comm(), op.stream)
                         : api.recv(op.buf, op.bytes, ncclUint8, op.peer, real.comm(), op.stream),
               op.isSend ? "ncclSend" : "ncclRecv");
  group.end();
}

/// Each communicator's sends and receives, communicators in first-call
/// order; a group of one communicator (the usual one) as it is.
void issueByComm(const std::vector<PendingP2P>& ops) {
  if (ops.empty()) return;
  if (std::all_of(ops.begin(), ops.end(), [&](const PendingP2P& op) { return op.comm == ops.front().comm; }))
    return issueP2P(ops.front().comm, ops);
  std::vector<ncclComm*> order;
  std::map<ncclComm*, std::vector<PendingP2P>> byComm;
  for (const auto& op : ops) {
    if (!byComm.count(op.comm)) order.push_back(op.comm);
    byComm[op.comm].push_back(op);
  }
  for (ncclComm* c : order) issueP2P(c, byComm[c]);
}

}  // namespace

Group& Group::current() {
  thread_local Group g;
  return g;
}

void issueP2P(ncclComm* comm, const std::vector<PendingP2P>& ops) {
  if (const RealNcclComm* real = comm->forwards(FallbackCall::SendRecv)) return forwardP2P(*real, ops);
  std::vector<P2POp> plan;
  plan.reserve(ops.size());
  for (const auto& op : ops) plan.push_back({op.isSend, op.peer});
  for (const P2PStep& step : scheduleP2P(comm->rank(), comm->size(), plan)) {
    const PendingP2P* send = step.send >= 0 ? &ops[step.send] : nullptr;
    const PendingP2P* recv = step.recv >= 0 ? &ops[step.recv] : nullptr;
    // One stream per step: the send's, after and before the receive's.
    const cudaStream_t s = send ? send->stream : recv->stream;
    const cudaStream_t other = send && recv ? recv->stream : nullptr;
    if (step.self) {
      if (send->bytes != recv->bytes)
        throw ApiFailure(Result::InvalidUsage, "rank " + std::to_string(comm->rank()) + ": a send of " +
                                                   std::to_string(send->bytes) + " bytes to itself meets a receive of " +
                                                   std::to_string(recv->bytes) + " bytes");
      comm->issue(s, [&] {
        if (send->bytes && recv->buf != send->buf &&
            cudaMemcpyAsync(recv->buf, send->buf, send->bytes, cudaMemcpyDeviceToDevice, s) != cudaSuccess)
          throw Error(ErrorCode::System, "cudaMemcpyAsync of a send to itself failed");
      }, other);
      continue;
    }
    const int sendPeer = send ? send->peer : recv->peer, recvPeer = recv ? recv->peer : send->peer;
    comm->issue(s, [&] {
      comm->gpu->sendRecv(send ? send->buf : nullptr, send ? send->bytes : 0, sendPeer, recv ? recv->buf : nullptr,
                          recv ? recv->bytes : 0, recvPeer, DataType::Uint8, s);
    }, other);
  }
}

bool Group::issue() {
  std::vector<PendingInit> myInits;
  std::vector<std::function<void()>> myColls;
  std::vector<PendingP2P> myP2P;
  myInits.swap(inits);
  myColls.swap(collectives);
  myP2P.swap(p2p);
  const NcclApi* api = realApi;
  realApi = nullptr;
  const bool pending = startNonBlockingInits(myInits);
  if (!myInits.empty()) runInits(myInits);
  for (const auto& op : myP2P)
    if (const RealNcclComm* real = op.comm->forwards(FallbackCall::SendRecv)) api = &real->api();
  RealNcclGroup realGroup(api);
  for (auto& c : myColls) c();
  issueByComm(myP2P);
  realGroup.end();
  // Hand the storage back (when no call of ours reopened a group meanwhile),
  // so the next group of this thread allocates nothing for its lists.
  myP2P.clear();
  myColls.clear();
  if (p2p.empty()) p2p.swap(myP2P);
  if (collectives.empty()) collectives.swap(myColls);
  return pending;
}

}  // namespace plugboard::ncclapi
