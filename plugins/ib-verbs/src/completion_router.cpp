#include "completion_router.hpp"

#include <algorithm>
#include <string>

#include "error.hpp"

namespace plugboard::ibverbs {

uint64_t CompletionRouter::attach(const std::vector<uint32_t>& qpNums, uint32_t entries) {
  const uint64_t id = nextId_++;
  for (uint32_t qp : qpNums) owner_[qp] = id;  // a queue-pair number may come back after its queue pair went
  connections_[id] = Attached{qpNums, entries, {}};
  needed_ += entries;
  return id;
}

void CompletionRouter::detach(uint64_t id) {
  const auto it = connections_.find(id);
  if (it == connections_.end()) return;
  for (uint32_t qp : it->second.qps) {
    const auto o = owner_.find(qp);
    if (o != owner_.end() && o->second == id) owner_.erase(o);
  }
  needed_ -= it->second.entries;
  connections_.erase(it);
}

bool CompletionRouter::route(const ibv_wc& wc) {
  const auto o = owner_.find(wc.qp_num);
  if (o == owner_.end()) return false;
  connections_.at(o->second).inbox.push_back(wc);
  return true;
}

void CompletionRouter::take(uint64_t id, std::vector<ibv_wc>& out) {
  out.clear();
  const auto it = connections_.find(id);
  if (it != connections_.end()) out.swap(it->second.inbox);
}

int completionQueueSize(uint64_t needed, uint64_t floor, int deviceMax, const std::string& where) {
  const uint64_t most = deviceMax > 0 ? static_cast<uint64_t>(deviceMax) : 0;
  IBV_CHECK(needed <= most, PB_ERR_UNSUPPORTED,
            "ib-verbs: " + where + ": the connections' work requests need a completion queue of " +
                std::to_string(needed) + " entries, the device's hold at most " + std::to_string(most) +
                " (max_cqe): lower ib-verbs.qps_per_connection");
  uint64_t size = 1;
  while (size < std::max(needed, floor)) size <<= 1;
  return static_cast<int>(std::min(size, most));
}

}  // namespace plugboard::ibverbs
