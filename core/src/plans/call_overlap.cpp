#include "plans/call_overlap.hpp"

#include <set>
#include <utility>

namespace plugboard {

bool callsNeedNoHandshake(const Plan& plan) {
  if (!plan.ll()) return false;
  std::set<std::pair<int, int>> sends;  // (from, to)
  for (int r = 0; r < plan.nranks; ++r)
    for (const auto& tb : plan.ranks[r].threadblocks)
      for (const auto& op : tb.ops)
        if (op.kind == PlanOp::Kind::PutPacket) sends.insert({r, plan.ranks[r].channels[op.channel].peer});
  for (const auto& [from, to] : sends)
    if (!sends.count({to, from})) return false;
  return true;
}

bool putsWaitForTheirTarget(const Plan& plan) {
  if (plan.ll() || plan.inPlace) return false;
  std::set<std::pair<int, int>> puts, waits;  // (rank, peer)
  for (int r = 0; r < plan.nranks; ++r)
    for (const auto& tb : plan.ranks[r].threadblocks)
      for (const auto& op : tb.ops) {
        if (op.channel < 0) continue;
        const int peer = plan.ranks[r].channels[op.channel].peer;
        if (op.kind == PlanOp::Kind::Put) puts.insert({r, peer});
        if (op.kind == PlanOp::Kind::Wait) waits.insert({r, peer});
      }
  for (const auto& pair : puts)
    if (!waits.count(pair)) return false;
  return true;
}

}  // namespace plugboard
