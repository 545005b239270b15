#include "lane.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>

#include "context.hpp"
#include "endpoint.hpp"
#include "error.hpp"

namespace plugboard::libfabric {

namespace {

/// Completions read per fi_cq_read.
constexpr size_t kBatch = 32;
/// How long a lane keeps polling after its own writes completed.
constexpr std::chrono::microseconds kHot{200};
/// A cold lane still progresses this often: the tcp provider moves data
/// (incoming writes included) only when progressed, and a peer's wake-up
/// message is a hint that may be skipped.
constexpr std::chrono::microseconds kNap{1000};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Lane::Lane(int index, const fi_info* info, Sink sink)
    : index_(index),
      where_("libfabric lane " + std::to_string(index) + " (provider " + info->fabric_attr->prov_name + ", domain " +
             info->domain_attr->name + ")"),
      sink_(std::move(sink)),
      mrMode_(info->domain_attr->mr_mode) {
  endpoint_ = openRdmEndpoint(info, 0, where_);
  thread_ = std::thread([this] { run(); });
}

Lane::~Lane() {
  stop();
  std::lock_guard<std::mutex> lock(mu_);
  retired_.clear();
  endpoint_.av.reset();
  endpoint_.cq.reset();
  endpoint_.domain.reset();
  endpoint_.fabric.reset();
}

void Lane::stop() {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  endpoint_.ep.reset();
}

Registration Lane::registerBuffer(void* ptr, size_t size, uint64_t access, fi_hmem_iface iface, int device,
                                  uint64_t requestedKey, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  return libfabric::registerBuffer(MrTarget{endpoint_.domain.get(), endpoint_.ep.get(), mrMode_}, ptr, size, access,
                                   iface, device, requestedKey, what + " on lane " + std::to_string(index_));
}

template <typename Pred>
std::vector<OpRecord*> Lane::dropQueued(Pred drop) {
  std::vector<OpRecord*> dropped;
  std::lock_guard<std::mutex> queueLock(queueMu_);
  for (auto* list : {&backlog_, &queue_}) {
    for (const LaneWrite& w : *list)
      if (drop(w)) dropped.push_back(w.op);
    list->erase(std::remove_if(list->begin(), list->end(), drop), list->end());
  }
  return dropped;
}

std::vector<OpRecord*> Lane::release(const LocalRegion* region, Registration& reg) {
  std::lock_guard<std::mutex> lock(mu_);
  auto dropped = dropQueued([&](const LaneWrite& w) { return w.source == region; });
  if (readers_.count(region))
    retired_.emplace_back(region, std::move(reg));
  else
    reg.mr.reset();
  return dropped;
}

std::vector<OpRecord*> Lane::forgetConnection(uint64_t conn) {
  std::lock_guard<std::mutex> lock(mu_);
  return dropQueued([&](const LaneWrite& w) { return w.op->conn == conn; });
}

void Lane::finished(OpRecord* op) {
  auto it = inFlight_.find(op);
  if (it == inFlight_.end()) return;
  auto reader = readers_.find(it->second);
  if (reader != readers_.end() && --reader->second == 0) readers_.erase(reader);
  inFlight_.erase(it);
}

void Lane::closeRetired() {
  retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                [&](const auto& r) { return readers_.count(r.first) == 0; }),
                 retired_.end());
}

fi_addr_t Lane::insertAddress(const std::vector<uint8_t>& name, const std::string& who) {
  std::lock_guard<std::mutex> lock(mu_);
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  int rc = fi_av_insert(endpoint_.av.get(), name.data(), 1, &addr, 0, nullptr);
  OFI_CHECK(rc == 1 && addr != FI_ADDR_NOTAVAIL, rc < 0 ? statusForFiError(-rc) : PB_ERR_INVALID,
            where_ + ": cannot insert the lane address of " + who + " (fi_av_insert: " +
                (rc < 0 ? fiErrorText(rc) : std::to_string(rc) + " of 1 inserted") + ")");
  ++addressRefs_[addr];
  return addr;
}

void Lane::removeAddress(fi_addr_t addr) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = addressRefs_.find(addr);
  if (it == addressRefs_.end() || --it->second > 0) return;
  addressRefs_.erase(it);
  if (endpoint_.av) fi_av_remove(endpoint_.av.get(), &addr, 1, 0);
}

void Lane::enqueue(const LaneWrite& w) {
  bool wasNapping;
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    queue_.push_back(w);
    wasNapping = napping_;
  }
  if (wasNapping) wake_.notify_one();
}

void Lane::heatFor(std::chrono::microseconds hot) {
  const int64_t until = nowNs() + std::chrono::nanoseconds(hot).count();
  int64_t was = hotUntil_.load(std::memory_order_relaxed);
  while (was < until && !hotUntil_.compare_exchange_weak(was, until, std::memory_order_relaxed)) {
  }
}

void Lane::touch(std::chrono::microseconds hot) {
  heatFor(hot);
  bool wasNapping;
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    wasNapping = napping_;
  }
  if (wasNapping) wake_.notify_one();
}

void Lane::run() {
  std::vector<LaneEvent> events;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(queueMu_);
      if (stop_) return;
    }
    events.clear();
    bool busy = false;
    try {
      busy = turn(events);
    } catch (const Error& e) {
      events.push_back(LaneEvent{nullptr, true, e.status(), e.what()});
    }
    if (!events.empty()) {
      heatFor(kHot);
      sink_(events);
      continue;
    }
    // Poll while own writes are out (their sending and delivery need
    // progress) or a peer said data is coming; otherwise nap.
    if (busy || nowNs() < hotUntil_.load(std::memory_order_relaxed)) {
      std::this_thread::yield();
      continue;
    }
    nap();
  }
}

bool Lane::turn(std::vector<LaneEvent>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  {
    std::lock_guard<std::mutex> queueLock(queueMu_);
    while (!queue_.empty()) {
      backlog_.push_back(queue_.front());
      queue_.pop_front();
    }
  }
  postBacklog(events);
  readCompletions(events);
  if (!retired_.empty()) closeRetired();
  if (!backlog_.empty()) postBacklog(events);  // completions made room
  return !backlog_.empty() || !inFlight_.empty();
}

void Lane::postBacklog(std::vector<LaneEvent>& events) {
  while (!backlog_.empty()) {
    LaneWrite& w = backlog_.front();
    iovec iov{const_cast<char*>(w.src), w.len};
    void* desc = w.desc;
    fi_rma_iov rma{w.remote, w.len, w.key};
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = w.addr;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = w.op;  // &OpRecord::fiCtx, its first member
    // Delivery complete: the completion means the data is at the target.
    ssize_t rc = fi_writemsg(endpoint_.ep.get(), &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
    if (rc == -FI_EAGAIN) return;
    if (rc == 0) {
      inFlight_.emplace(w.op, w.source);
      ++readers_[w.source];
    }
    if (rc < 0)
      events.push_back(LaneEvent{w.op, true, statusForFiError(static_cast<int>(-rc)),
                                 where_ + ": a write of " + std::to_string(w.len) +
                                     " bytes could not be posted: fi_writemsg: " + fiErrorText(rc)});
    backlog_.pop_front();
  }
}

void Lane::readCompletions(std::vector<LaneEvent>& events) {
  fi_cq_msg_entry entries[kBatch];
  for (;;) {
    ssize_t n = fi_cq_read(endpoint_.cq.get(), entries, kBatch);
    if (n == -FI_EAGAIN) return;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(endpoint_.cq.get(), &err, 0) < 0) return;
      char buf[256] = "";
      const char* detail = fi_cq_strerror(endpoint_.cq.get(), err.prov_errno, err.err_data, buf, sizeof(buf));
      std::string text = where_ + ": " + fi_strerror(err.err);
      if (detail && *detail) text += std::string(" (") + detail + ")";
      if (err.op_context) {
        events.push_back(LaneEvent{static_cast<OpRecord*>(err.op_context), true, statusForFiError(err.err), text});
        finished(static_cast<OpRecord*>(err.op_context));
      }
      continue;
    }
    fiCheck(n, where_ + ": reading the completion queue (fi_cq_read)");
    for (ssize_t i = 0; i < n; ++i) {
      if (!entries[i].op_context) continue;
      events.push_back(LaneEvent{static_cast<OpRecord*>(entries[i].op_context), false, PB_OK, {}});
      finished(static_cast<OpRecord*>(entries[i].op_context));
    }
    if (static_cast<size_t>(n) < kBatch) return;
  }
}

void Lane::nap() {
  std::unique_lock<std::mutex> lock(queueMu_);
  // touch() stores hotUntil_ before it takes queueMu_ to see napping_.
  if (stop_ || !queue_.empty() || nowNs() < hotUntil_.load(std::memory_order_relaxed)) return;
  napping_ = true;
  wake_.wait_for(lock, kNap);
  napping_ = false;
}

}  // namespace plugboard::libfabric
