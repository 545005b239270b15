#include "plans/call_overlap.hpp"

#include <map>
#include <set>
#include <tuple>
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

namespace {

/// A plan's operations as the nodes of a happens-before graph within one
/// call, numbered rank by rank, thread block by thread block, in order;
/// then a node per barrier meeting (addBarriers).
class OpGraph {
 public:
  explicit OpGraph(const Plan& plan) : plan_(plan) {
    for (int r = 0; r < plan.nranks; ++r) {
      first_.emplace_back();
      for (const auto& tb : plan.ranks[r].threadblocks) {
        first_[r].push_back(rankOf_.size());
        rankOf_.insert(rankOf_.end(), tb.ops.size(), r);
      }
    }
    next_.resize(rankOf_.size());
    addProgramOrder();
    addSignalsToWaits();
    addBarriers();
  }

  /// Ranks with an operation reachable from one of rank `from`'s.
  std::vector<bool> reachedRanks(int from) const {
    std::vector<bool> ranks(plan_.nranks, false);
    ranks[from] = true;
    const std::vector<bool> seen = reached(nodesOf(from));
    for (size_t n = 0; n < seen.size(); ++n)
      if (seen[n]) ranks[rankOf_[n]] = true;
    return ranks;
  }

  /// Nodes reachable from the nodes in `start`, those included.
  std::vector<bool> reached(const std::vector<size_t>& start) const { return walk(start, next_); }

  /// Nodes from which one of the nodes in `start` is reachable, those included.
  std::vector<bool> reaching(const std::vector<size_t>& start) const {
    std::vector<std::vector<size_t>> prev(next_.size());
    for (size_t n = 0; n < next_.size(); ++n)
      for (size_t m : next_[n]) prev[m].push_back(n);
    return walk(start, prev);
  }

  /// The nodes of rank r's operations.
  std::vector<size_t> nodesOf(int r) const {
    std::vector<size_t> nodes;
    for (size_t n = 0; n < rankOf_.size(); ++n)
      if (rankOf_[n] == r) nodes.push_back(n);
    return nodes;
  }

  /// The node of rank r's thread block tb, operation op.
  size_t node(int r, size_t tb, size_t op) const { return first_[r][tb] + op; }

 private:
  struct At {
    size_t tb, node;
  };

  /// The nodes reachable from `start` along `edges`, those included.
  static std::vector<bool> walk(const std::vector<size_t>& start, const std::vector<std::vector<size_t>>& edges) {
    std::vector<bool> seen(edges.size(), false);
    std::vector<size_t> todo;
    for (size_t n : start)
      if (!seen[n]) seen[n] = true, todo.push_back(n);
    while (!todo.empty()) {
      const size_t n = todo.back();
      todo.pop_back();
      for (size_t m : edges[n])
        if (!seen[m]) seen[m] = true, todo.push_back(m);
    }
    return seen;
  }

  void addProgramOrder() {
    for (int r = 0; r < plan_.nranks; ++r)
      for (size_t t = 0; t < plan_.ranks[r].threadblocks.size(); ++t)
        for (size_t k = 1; k < plan_.ranks[r].threadblocks[t].ops.size(); ++k) next_[node(r, t, k - 1)].push_back(node(r, t, k));
  }

  static bool oneBlock(const std::vector<At>& ops) {
    for (const At& a : ops)
      if (a.tb != ops.front().tb) return false;
    return true;
  }

  // Waits count a channel's signals: the j-th wait of a call needs j + 1 of
  // the call's signals (or later calls', made after all of this call's),
  // whatever order they land in, so the signaller made its j-th by then.
  void addSignalsToWaits() {
    using Key = std::tuple<int, int, int, int64_t>;  // signaller, waiter, type, tag
    std::map<Key, std::vector<At>> signals, waits;
    for (int r = 0; r < plan_.nranks; ++r)
      for (size_t t = 0; t < plan_.ranks[r].threadblocks.size(); ++t)
        for (size_t k = 0; k < plan_.ranks[r].threadblocks[t].ops.size(); ++k) {
          const PlanOp& op = plan_.ranks[r].threadblocks[t].ops[k];
          if (op.channel < 0) continue;
          const PlanChannel& c = plan_.ranks[r].channels[op.channel];
          if (op.kind == PlanOp::Kind::Signal) signals[{r, c.peer, static_cast<int>(c.type), c.tag}].push_back({t, node(r, t, k)});
          if (op.kind == PlanOp::Kind::Wait) waits[{c.peer, r, static_cast<int>(c.type), c.tag}].push_back({t, node(r, t, k)});
        }
    for (const auto& [key, w] : waits) {
      auto s = signals.find(key);
      if (s == signals.end() || !oneBlock(s->second)) continue;  // several signalling blocks: which one counted is unknown
      const bool matched = oneBlock(w);
      for (size_t j = 0; j < w.size(); ++j)
        if (!matched) next_[s->second.front().node].push_back(w[j].node);
        else if (j < s->second.size()) next_[s->second[j].node].push_back(w[j].node);
    }
  }

  // The n-th barrier of a group in each of its blocks is one meeting:
  // every block leaves it after every block arrived. A node of its own
  // stands for the meeting (each member's barrier before it and after it),
  // so a group of many blocks adds edges in proportion to its members, not
  // to their square; it counts as an operation of the rank, whose members
  // it only joins.
  void addBarriers() {
    for (int r = 0; r < plan_.nranks; ++r) {
      std::map<std::pair<int, int>, std::vector<size_t>> meetings;  // (group, n) -> the blocks' barrier ops
      for (size_t t = 0; t < plan_.ranks[r].threadblocks.size(); ++t) {
        std::map<int, int> seen;
        for (size_t k = 0; k < plan_.ranks[r].threadblocks[t].ops.size(); ++k) {
          const PlanOp& op = plan_.ranks[r].threadblocks[t].ops[k];
          if (op.kind == PlanOp::Kind::Barrier) meetings[{op.barrier, seen[op.barrier]++}].push_back(node(r, t, k));
        }
      }
      for (const auto& [meeting, ops] : meetings) {
        const size_t met = rankOf_.size();
        rankOf_.push_back(r);
        next_.emplace_back(ops.begin(), ops.end());
        for (size_t a : ops) next_[a].push_back(met);
      }
    }
  }

  const Plan& plan_;
  std::vector<std::vector<size_t>> first_;  // [rank][thread block] -> node of its first operation
  std::vector<int> rankOf_;                 // node -> rank
  std::vector<std::vector<size_t>> next_;   // node -> nodes that happen after it
};

}  // namespace

std::vector<bool> happensAfterRank(const Plan& plan, int from) { return OpGraph(plan).reachedRanks(from); }

namespace {

/// The ranks whose buffers an operation of rank r reads or writes besides
/// r's own (a switch operation: every rank's bound buffer).
std::vector<int> peersTouched(const Plan& plan, int r, const PlanOp& op) {
  switch (op.kind) {
    case PlanOp::Kind::Put:
    case PlanOp::Kind::PutPacket:
    case PlanOp::Kind::Get: return {plan.ranks[r].channels[op.channel].peer};
    case PlanOp::Kind::SwitchReduce:
    case PlanOp::Kind::SwitchBroadcast: {
      std::vector<int> all;
      for (int q = 0; q < plan.nranks; ++q)
        if (q != r) all.push_back(q);
      return all;
    }
    default: return {};
  }
}

bool usesPortChannels(const Plan& plan) {
  for (const auto& rank : plan.ranks)
    for (const auto& tb : rank.threadblocks)
      for (const auto& op : tb.ops)
        if (op.channel >= 0 && rank.channels[op.channel].type == PlanChannel::Type::Port) return true;
  return false;
}

}  // namespace

bool accessesStayInsideTheOwnersCall(const Plan& plan) {
  if (usesPortChannels(plan)) return false;
  const OpGraph graph(plan);
  // Per owner: the nodes after one of its operations, and those before one
  // (two walks a rank, so a plan of many operations stays cheap to check).
  std::map<int, std::pair<std::vector<bool>, std::vector<bool>>> around;
  for (int r = 0; r < plan.nranks; ++r)
    for (size_t t = 0; t < plan.ranks[r].threadblocks.size(); ++t)
      for (size_t k = 0; k < plan.ranks[r].threadblocks[t].ops.size(); ++k)
        for (int owner : peersTouched(plan, r, plan.ranks[r].threadblocks[t].ops[k])) {
          auto it = around.find(owner);
          if (it == around.end()) {
            const std::vector<size_t> ops = graph.nodesOf(owner);
            it = around.emplace(owner, std::make_pair(graph.reached(ops), graph.reaching(ops))).first;
          }
          const size_t access = graph.node(r, t, k);
          if (!it->second.first[access]) return false;   // may run before the owner's call began
          if (!it->second.second[access]) return false;  // may still run after the owner's call ended
        }
  return true;
}

bool channelsStayInOneBlock(const Plan& plan) {
  for (const auto& rank : plan.ranks) {
    std::vector<int64_t> owner(rank.channels.size(), -1);
    for (size_t t = 0; t < rank.threadblocks.size(); ++t)
      for (const auto& op : rank.threadblocks[t].ops) {
        if (op.channel < 0) continue;
        if (owner[op.channel] >= 0 && owner[op.channel] != int64_t(t)) return false;
        owner[op.channel] = static_cast<int64_t>(t);
      }
  }
  return true;
}

bool putsHearFromTheirTarget(const Plan& plan) {
  if (plan.ll() || plan.inPlace) return false;
  std::set<std::pair<int, int>> puts;  // (writer, target)
  for (int r = 0; r < plan.nranks; ++r)
    for (const auto& tb : plan.ranks[r].threadblocks)
      for (const auto& op : tb.ops)
        if (op.kind == PlanOp::Kind::Put) puts.insert({r, plan.ranks[r].channels[op.channel].peer});
  const OpGraph graph(plan);
  std::map<int, std::vector<bool>> heardBy;  // target -> ranks that hear from it
  for (const auto& [writer, target] : puts) {
    auto it = heardBy.find(target);
    if (it == heardBy.end()) it = heardBy.emplace(target, graph.reachedRanks(target)).first;
    if (!it->second[writer]) return false;
  }
  return true;
}

}  // namespace plugboard
