// A lane: a second RDM endpoint on a fabric and domain of its own (nothing
// of the provider's progress is shared with the context's endpoint), with a thread that
// posts its writes and reads its completion queue. Large writes are cut
// into one piece per lane, so their copies through the provider (the tcp
// provider sends and receives in whichever thread progresses it) run on
// several cores at once, as the ethernet plugin's stripe sockets do.
// README "Lanes".
//
// Locking: mu_ guards every libfabric call on the lane's objects (its
// domain is opened FI_THREAD_DOMAIN) and the lane's backlog; queueMu_
// guards the queue writes are handed over in. Order: the context's mutex,
// then mu_, then queueMu_. The lane thread never holds mu_ or queueMu_
// while it hands completions to the context (Sink), which takes the
// context's mutex.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "endpoint.hpp"
#include "fid.hpp"
#include "memory.hpp"

namespace plugboard::libfabric {

struct OpRecord;

/// A write handed to a lane: one fabric write, delivery complete.
struct LaneWrite {
  OpRecord* op = nullptr;               ///< Its record (context-owned); its completion's context.
  const LocalRegion* source = nullptr;  ///< The region it reads (dropped if that is deregistered first).
  const char* src = nullptr;
  size_t len = 0;
  void* desc = nullptr;  ///< The source's descriptor in the lane's domain.
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  uint64_t remote = 0;
  uint64_t key = 0;
};

/// What a lane reports to the context: a completed operation, a failed one
/// (op set, failed), or the lane itself broken (op NULL).
struct LaneEvent {
  OpRecord* op = nullptr;
  bool failed = false;
  pb_status status = PB_OK;
  std::string what;
};

/// One lane. See the file comment.
class Lane {
 public:
  /// Receives a batch of events, with no lane lock held.
  using Sink = std::function<void(std::vector<LaneEvent>&)>;

  /// Opens a fabric, domain, completion queue, address vector and endpoint
  /// of info and starts the lane's thread. Throws Error naming the lane.
  Lane(int index, const fi_info* info, Sink sink);
  /// Stops the thread and closes everything; queued writes are forgotten
  /// (their records are the context's). Regions registered here must be
  /// closed before (release()).
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  /// Joins the thread and closes the endpoint; idempotent. After it only
  /// release() and the destructor may be called.
  void stop();

  /// This lane's endpoint name (fi_getname).
  const std::vector<uint8_t>& name() const { return endpoint_.name; }
  /// Registers [ptr, ptr + size) in the lane's domain (as registerBuffer).
  Registration registerBuffer(void* ptr, size_t size, uint64_t access, fi_hmem_iface iface, int device,
                              uint64_t requestedKey, const std::string& what);
  /// Drops the queued writes that read region, returning their records, and
  /// closes reg (region's registration here) once no write the provider has
  /// reads it any more (a registration closed under an operation in flight
  /// crashed ofi_rxm when that operation completed).
  std::vector<OpRecord*> release(const LocalRegion* region, Registration& reg);
  /// Drops the queued writes of connection conn (being freed), returning
  /// their records; those the provider has still complete.
  std::vector<OpRecord*> forgetConnection(uint64_t conn);
  /// Inserts a peer lane's endpoint name (counted, like the context's).
  fi_addr_t insertAddress(const std::vector<uint8_t>& name, const std::string& who);
  /// Drops one reference to addr.
  void removeAddress(fi_addr_t addr) noexcept;
  /// Hands w to the lane's thread, which posts it in order.
  void enqueue(const LaneWrite& w);
  /// Keeps the thread polling for at least `hot` (data is on its way to
  /// this lane: the provider moves it only while progressed).
  void touch(std::chrono::microseconds hot);

 private:
  /// The thread: posts queued writes, reads completions, naps when idle.
  void run();
  /// One turn under mu_: posts what is queued, reads completions into
  /// events. Returns true while writes are queued or in flight.
  bool turn(std::vector<LaneEvent>& events);
  /// Extends the polling window to now + hot.
  void heatFor(std::chrono::microseconds hot);
  /// Posts backlog_ in order until the provider is out of room.
  void postBacklog(std::vector<LaneEvent>& events);
  /// Reads the completion queue (completions and errors) into events.
  void readCompletions(std::vector<LaneEvent>& events);
  /// Sleeps until enqueue/touch or a nap's end.
  void nap();
  /// Removes the queued writes `drop` selects; returns their records (mu_ held).
  template <typename Pred>
  std::vector<OpRecord*> dropQueued(Pred drop);
  /// Bookkeeping of one write the provider finished (mu_ held).
  void finished(OpRecord* op);
  /// Closes retired registrations no write in flight reads (mu_ held).
  void closeRetired();

  const int index_;
  const std::string where_;
  Sink sink_;
  uint64_t mrMode_ = 0;

  std::mutex mu_;
  Endpoint endpoint_;  // fabric, domain, queue, AV, endpoint and its name
  std::map<fi_addr_t, int> addressRefs_;
  std::deque<LaneWrite> backlog_;  // taken from queue_, not yet accepted by the provider (mu_)
  std::unordered_map<OpRecord*, const LocalRegion*> inFlight_;  // accepted by the provider, not completed (mu_)
  std::unordered_map<const LocalRegion*, size_t> readers_;       // in-flight writes per source region (mu_)
  std::vector<std::pair<const LocalRegion*, Registration>> retired_;  // released while still read (mu_)

  std::mutex queueMu_;
  std::condition_variable wake_;
  std::deque<LaneWrite> queue_;
  bool stop_ = false;
  bool napping_ = false;
  std::atomic<int64_t> hotUntil_{0};  // steady_clock ns: poll without napping until then

  std::thread thread_;
};

}  // namespace plugboard::libfabric
