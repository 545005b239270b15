// A context's one completion queue, shared by the queue pairs of all its
// connections (as NCCL's IB transport shares one per device): fewer
// queues for the HCA to serve and one poll per proxy pass sees every
// connection's completions. Whichever connection's proxy_progress polls it
// routes what it finds to each connection's inbox (CompletionRouter);
// each connection then handles its own under its own lock. Lock order: a
// connection's mutex, then this queue's.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "completion_router.hpp"
#include "verbs.hpp"

namespace plugboard::ibverbs {

class SharedCq {
 public:
  /// Creates the queue on the device (kInitialEntries, or the device's
  /// max_cqe if smaller). Throws Error naming `where`.
  SharedCq(ibv_context* verbs, std::string where);
  SharedCq(const SharedCq&) = delete;
  SharedCq& operator=(const SharedCq&) = delete;

  /// The queue, for ibv_create_qp.
  ibv_cq* handle() const { return cq_.get(); }
  /// Attaches a connection's queue pairs (entries: their work requests in
  /// flight at most), growing the queue (ibv_resize_cq) when the attached
  /// connections could overrun it; returns the connection's id.
  uint64_t attach(const std::vector<uint32_t>& qpNums, uint32_t entries);
  /// Forgets a connection after its queue pairs were destroyed.
  void detach(uint64_t id);
  /// Polls the queue empty, routing every completion, then hands connection
  /// id its own (cleared first). Returns 0, or ibv_poll_cq's negative error.
  int poll(uint64_t id, std::vector<ibv_wc>& out);

  /// Entries the queue is created with (65536 covers 256 connections of one
  /// queue pair at Connection::kSendDepth before the first resize).
  static constexpr uint64_t kInitialEntries = 65536;

 private:
  std::string where_;
  int deviceMax_ = 0;
  int size_ = 0;
  std::mutex mutex_;
  CompletionQueue cq_;
  CompletionRouter router_;
};

}  // namespace plugboard::ibverbs
