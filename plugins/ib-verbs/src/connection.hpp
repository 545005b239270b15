// One connection to a peer: ib-verbs.qps_per_connection reliable-connected
// queue pairs on the context's shared completion queue. Writes are RDMA writes striped over the
// queue pairs; signals are RDMA atomic fetch-and-adds on queue pair 0,
// posted only once every earlier write on the other queue pairs completed
// (queue pairs do not order among themselves; on one queue pair the
// responder applies requests in order). Every work request is signalled;
// an operation is complete when all of its work requests are, and
// operations complete in posting order. Work requests wait in their queue
// pair's backlog while its send queue is full, and a signal also until the
// other queue pairs' earlier requests completed (post_queues.hpp); work
// behind it on the other queue pairs goes on. After writes into a peer's
// GPU memory a signal also waits for a read back from it (gpu_flush.hpp,
// ib-verbs.gdr_flush). The first failed completion
// ends the connection: every later call throws it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "completion.hpp"
#include "context.hpp"
#include "error.hpp"
#include "gpu_flush.hpp"
#include "memory.hpp"
#include "post_queues.hpp"
#include "qp_plan.hpp"
#include "verbs.hpp"

namespace plugboard::ibverbs {

/// The far end of a connection (the adapter's).
using PeerInfo = transport_cxx::PeerInfo;

/// A connection to one peer (the core's pb_conn*).
class Connection {
 public:
  /// Work requests one queue pair keeps in flight.
  static constexpr uint32_t kSendDepth = 256;

  /// Creates the queue pairs (moved to INIT) on the shared completion queue and
  /// writes this end's address blob into addr (*addrLen bytes at most).
  Connection(Context& ctx, const PeerInfo& peer, void* addr, size_t* addrLen);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Context& context() { return ctx_; }
  const PeerInfo& peer() const { return peer_; }

  /// Applies the peer's address: every queue pair to RTR then RTS. Done at
  /// the first call; later calls (the core repeats them) return true.
  bool connect(const void* peerAddr, size_t len);
  void postWrite(LocalRegion& src, size_t srcOffset, RemoteRegion& dst, size_t dstOffset, size_t size);
  void postSignal(RemoteRegion& dst, size_t dstOffset, uint64_t value);
  void postWriteSignal(LocalRegion& src, size_t srcOffset, RemoteRegion& dst, size_t dstOffset, size_t size,
                       RemoteRegion& signalDst, size_t signalOffset, uint64_t value);
  /// Posts what the backlog holds, polls the completion queue, and reports
  /// the sequence number of the last completed operation.
  void progress(uint64_t* completed);
  /// Posts what the backlog holds (nothing is batched otherwise).
  void flush();

 private:
  /// A posted operation: its sequence number and work requests not yet complete.
  struct Op {
    uint64_t seq = 0;
    OpKind kind = OpKind::Write;
    uint32_t pending = 0;
    uint32_t flushReads = 0;  ///< GPUDirect flush reads posted before its signal
  };
  /// A work request waiting for room on its queue pair.
  struct Request {
    size_t qp = 0;
    ibv_send_wr wr{};
    ibv_sge sge{};
  };

  void throwIfFailed() const;
  void checkConnected(const char* op) const;
  uint64_t beginOp(OpKind kind, uint32_t requests, uint32_t flushReads = 0);
  /// The work requests of a write: its stripes, each cut to the port's max_msg_sz.
  std::vector<Request> writeRequests(uint64_t seq, LocalRegion& src, size_t srcOffset, RemoteRegion& dst,
                                     size_t dstOffset, size_t size) const;
  /// proxy_connect's work: the peer's blob checked, every queue pair to RTR and RTS.
  void applyPeerAddress(const void* peerAddr, size_t len);
  /// Remembers the writes into peer GPU memory a later signal must flush (when ib-verbs.gdr_flush).
  void noteWrites(const std::vector<Request>& writes, const RemoteRegion& dst);
  /// Queues the flush reads, then the atomic: fenced behind a read on its
  /// queue pair, draining the other queue pairs' earlier work (their reads too).
  void queueSignal(uint64_t seq, const std::vector<FlushRead>& reads, RemoteRegion& dst, size_t dstOffset,
                   uint64_t value);
  void checkWrite(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset, size_t size) const;
  void checkSignal(const RemoteRegion& dst, size_t dstOffset) const;
  /// Queues every request on its queue pair (none drains).
  void queueWrites(const std::vector<Request>& writes);
  void pump();
  void complete(const ibv_wc& wc);
  [[noreturn]] void fail(pb_status status, const std::string& message);
  /// The parties of a failed completion of work request wrId (op: its operation, if outstanding).
  CompletionParties parties(const Op* op, uint64_t wrId) const;
  LocalPort localPort() const;

  Context& ctx_;
  PeerInfo peer_;
  std::mutex mutex_;
  std::vector<QueuePair> qps_;
  uint64_t cqId_ = 0;                       // this connection in the shared completion queue
  std::vector<ibv_wc> completions_;         // what the last poll brought this connection
  std::vector<uint32_t> psns_;
  uint32_t inlineLimit_ = 0;                // largest inline write every queue pair takes
  std::unique_ptr<uint64_t[]> fetched_;     // [0]: atomics' old value, [1]: flush reads' byte (both unused)
  MemoryRegion fetchedMr_;                  // destroyed before fetched_
  GpuFlushTracker flushes_{0};              // made with the queue pairs
  std::unique_ptr<PostQueues<Request>> backlog_;  // per queue pair; made with the queue pairs
  std::deque<Op> ops_;
  uint64_t posted_ = 0, completed_ = 0;
  bool connected_ = false;
  std::optional<Error> failure_;
};

}  // namespace plugboard::ibverbs
