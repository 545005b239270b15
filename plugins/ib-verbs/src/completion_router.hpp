// Where the completions of a context's one completion queue go: each to the
// connection whose queue pair it names. Device-free (ibv_wc is plain data),
// so CI tests it; SharedCq (shared_cq.hpp) wraps it around the real queue.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace plugboard::ibverbs {

/// Routes completions to connections by queue-pair number and keeps the
/// entries the queue must hold. Not thread-safe: SharedCq locks around it.
class CompletionRouter {
 public:
  /// Attaches a connection's queue pairs, which keep at most `entries` work
  /// requests in flight together; returns the connection's id.
  uint64_t attach(const std::vector<uint32_t>& qpNums, uint32_t entries);
  /// Forgets a connection whose queue pairs are destroyed: its undelivered
  /// completions and any that still name its queue pairs are dropped.
  void detach(uint64_t id);
  /// Queues wc for the connection of wc.qp_num; false (dropped) when no
  /// attached connection has that queue pair.
  bool route(const ibv_wc& wc);
  /// Moves connection id's completions, in arrival order, into out (which
  /// is cleared first).
  void take(uint64_t id, std::vector<ibv_wc>& out);
  /// Entries every attached connection may have in flight together.
  uint64_t entriesNeeded() const { return needed_; }

 private:
  struct Attached {
    std::vector<uint32_t> qps;
    uint32_t entries = 0;
    std::vector<ibv_wc> inbox;
  };
  std::map<uint64_t, Attached> connections_;
  std::unordered_map<uint32_t, uint64_t> owner_;  // qp_num -> connection id
  uint64_t nextId_ = 1;
  uint64_t needed_ = 0;
};

/// The size to create or resize a completion queue to so it holds `needed`
/// entries, on a device whose queues hold at most deviceMax: the next power
/// of two (so resizes are rare), at least `floor`, at most deviceMax.
/// Throws Error(PB_ERR_UNSUPPORTED) naming both numbers when needed exceeds
/// deviceMax (`where` names the device).
int completionQueueSize(uint64_t needed, uint64_t floor, int deviceMax, const std::string& where);

}  // namespace plugboard::ibverbs
