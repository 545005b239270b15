#include "shared_cq.hpp"

#include <algorithm>

#include "error.hpp"

namespace plugboard::ibverbs {

SharedCq::SharedCq(ibv_context* verbs, std::string where) : where_(std::move(where)) {
  ibv_device_attr attr{};
  verbsCheck(ibv_query_device(verbs, &attr), "ib-verbs: " + where_ + ": ibv_query_device", PB_ERR_SYSTEM);
  deviceMax_ = attr.max_cqe;
  size_ = completionQueueSize(0, std::min<uint64_t>(kInitialEntries, static_cast<uint64_t>(attr.max_cqe)), deviceMax_, where_);
  cq_.reset(ibv_create_cq(verbs, size_, nullptr, nullptr, 0));
  if (!cq_) verbsNullFailure("ib-verbs: " + where_ + ": ibv_create_cq of " + std::to_string(size_) + " entries", PB_ERR_SYSTEM);
}

uint64_t SharedCq::attach(const std::vector<uint32_t>& qpNums, uint32_t entries) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t needed = router_.entriesNeeded() + entries;
  if (needed > static_cast<uint64_t>(size_)) {
    const int size = completionQueueSize(needed, 0, deviceMax_, where_);
    verbsCheck(ibv_resize_cq(cq_.get(), size),
               "ib-verbs: " + where_ + ": ibv_resize_cq from " + std::to_string(size_) + " to " + std::to_string(size) +
                   " entries (for one more connection; lower ib-verbs.qps_per_connection if the device cannot)",
               PB_ERR_SYSTEM);
    size_ = size;
  }
  return router_.attach(qpNums, entries);
}

void SharedCq::detach(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  router_.detach(id);
}

int SharedCq::poll(uint64_t id, std::vector<ibv_wc>& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  ibv_wc wcs[32];
  int n = 0;
  while ((n = ibv_poll_cq(cq_.get(), 32, wcs)) > 0)
    for (int i = 0; i < n; ++i) router_.route(wcs[i]);  // a destroyed queue pair's leftovers are dropped
  router_.take(id, out);
  return n < 0 ? n : 0;
}

}  // namespace plugboard::ibverbs
