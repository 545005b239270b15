// Work requests waiting to be posted, one FIFO per queue pair of a
// connection. A request waits while its queue pair has `depth` requests in
// flight. A request marked `drain` (a signal's atomic when a connection has
// several queue pairs, which do not order among themselves) also waits
// until every request queued before it on the other queue pairs has
// completed; requests queued after it on other queue pairs go on meanwhile
// (a later write may land before an earlier signal on any transport: the
// ABI orders a signal only after the writes before it). Device-free, so
// tested in CI (IbPostQueues.*).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace plugboard::ibverbs {

/// Per-queue-pair FIFOs of Request with in-flight limits and drains.
template <typename Request>
class PostQueues {
 public:
  /// qps queue pairs, each keeping at most depth requests in flight.
  PostQueues(size_t qps, uint32_t depth)
      : queues_(qps), queued_(qps, 0), done_(qps, 0), inFlight_(qps, 0), depth_(depth) {}

  /// Queues r on queue pair qp; a drain waits for what the other queue
  /// pairs hold or run at this moment.
  void push(size_t qp, Request r, bool drain) {
    Entry e{std::move(r), {}};
    if (drain) e.after = queued_;  // queue pair qp's own entry is never looked at
    queues_[qp].push_back(std::move(e));
    ++queued_[qp];
  }

  /// Calls post(qp, request) for every request that may go now, each queue
  /// pair's in order; a request counts as in flight once post returns (an
  /// exception from post leaves it queued and ends the pass).
  template <typename Post>
  void pump(Post&& post) {
    for (size_t qp = 0; qp < queues_.size(); ++qp) {
      auto& q = queues_[qp];
      while (!q.empty() && inFlight_[qp] < depth_ && drained(qp, q.front())) {
        post(qp, q.front().request);
        ++inFlight_[qp];
        q.pop_front();
      }
    }
  }

  /// One request in flight on qp completed (queue pairs complete their
  /// requests in posting order). False when qp had none in flight.
  bool completed(size_t qp) {
    if (qp >= inFlight_.size() || inFlight_[qp] == 0) return false;
    --inFlight_[qp];
    ++done_[qp];
    return true;
  }

  /// Requests posted on qp and not completed.
  uint32_t inFlight(size_t qp) const { return inFlight_[qp]; }
  /// Requests waiting on qp.
  size_t waiting(size_t qp) const { return queues_[qp].size(); }

 private:
  struct Entry {
    Request request;
    std::vector<uint64_t> after;  ///< A drain: requests of each queue pair that must complete first.
  };

  bool drained(size_t qp, const Entry& e) const {
    for (size_t o = 0; o < e.after.size(); ++o)
      if (o != qp && done_[o] < e.after[o]) return false;
    return true;
  }

  std::vector<std::deque<Entry>> queues_;
  std::vector<uint64_t> queued_, done_;  // per queue pair: requests ever queued, ever completed
  std::vector<uint32_t> inFlight_;
  uint32_t depth_;
};

}  // namespace plugboard::ibverbs
