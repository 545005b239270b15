#include "selection/selector.hpp"

#include <algorithm>

#include <plugboard/transport.h>

#include "plugboard/error.hpp"

namespace plugboard {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::vector<std::string> allTransports(const std::vector<RankView>& ranks) {
  std::vector<std::string> out;
  for (const auto& r : ranks)
    for (const auto& t : r.transports)
      if (!has(out, t)) out.push_back(t);
  return out;
}

/// Reach of a -> b over t, or why it cannot be used.
Reach reachOf(const std::vector<RankView>& ranks, int a, int b, const std::string& t) {
  if (!has(ranks[a].transports, t)) return {-1, "not loaded on rank " + std::to_string(a)};
  auto peer = ranks[a].reach.find(b);
  if (peer == ranks[a].reach.end()) return {-1, "rank " + std::to_string(a) + " reported nothing for rank " + std::to_string(b)};
  auto it = peer->second.find(t);
  if (it == peer->second.end()) return {-1, "rank " + std::to_string(a) + " reported nothing for it"};
  return it->second;
}

/// True when rank r's transport t moves memory of memType (a pb_mem_type
/// bit, or kMemCudaStaged); unknown transports: assume host only.
bool moves(const RankView& r, const std::string& t, uint32_t memType) {
  auto it = r.memTypes.find(t);
  return (it == r.memTypes.end() ? 1u : it->second) & memType;
}

/// Combined cost of t for the pair, or -1 with the reason.
Reach pairReach(const std::vector<RankView>& ranks, int a, int b, const std::string& t, uint32_t memType) {
  for (int r : {a, b})
    if (has(ranks[r].transports, t) && !moves(ranks[r], t, memType))
      return {-1, std::string("does not move ") +
                      (memType == kMemCudaStaged ? std::string("CUDA memory, even staged")
                                                 : memTypeName(memType) + std::string(" memory"))};
  Reach ab = reachOf(ranks, a, b, t);
  if (ab.cost < 0) return ab;
  Reach ba = reachOf(ranks, b, a, t);
  if (ba.cost < 0) return ba;
  return {ab.cost + ba.cost, ""};
}

const Rule* firstMatch(const std::vector<Rule>& rules, const std::vector<RankView>& ranks, int a, int b) {
  for (const auto& r : rules)
    if (peersMatch(r.peers, a, b, ranks[a].host, ranks[b].host)) return &r;
  return nullptr;
}

/// The pair's transport among those moving memType (one bit).
PairChoice chooseFor(const std::vector<RankView>& ranks, const std::vector<Rule>& rules, int a, int b,
                     uint32_t memType) {
  const Rule* rule = firstMatch(rules, ranks, a, b);
  std::vector<std::string> candidates = rule ? rule->use : allTransports(ranks);
  std::string skipped;
  std::vector<std::pair<int, std::string>> usable;  // (cost, transport) in candidate order
  for (const auto& t : candidates) {
    Reach r = pairReach(ranks, a, b, t, memType);
    if (r.cost < 0) {
      // The reason names what was passed over: with a rule, only those before its choice.
      if (!rule || usable.empty()) skipped += (skipped.empty() ? "" : "; ") + t + ": " + r.reason;
      continue;
    }
    usable.emplace_back(r.cost, t);
  }
  // A rule's order is the user's preference; without one, rising cost
  // (stable: ties keep rank 0's load order).
  if (!rule)
    std::stable_sort(usable.begin(), usable.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  const std::string best = usable.empty() ? "" : usable.front().second;
  std::string basis = rule ? "rule " + rule->origin + " " + rule->peers.describe() : "lowest cost";
  if (best.empty())
    throw Error(ErrorCode::Config, std::string("no transport can move ") + memTypeName(memType) +
                                       " memory between rank " + std::to_string(a) + " (host " + ranks[a].host +
                                       ") and rank " + std::to_string(b) + " (host " + ranks[b].host + ") by " +
                                       basis + ": " + (skipped.empty() ? "no candidates" : skipped));
  PairChoice choice;
  choice.transport = best;
  choice.why = basis + (skipped.empty() ? "" : "; " + skipped);
  for (size_t i = 1; i < usable.size(); ++i) choice.fallbacks.push_back(usable[i].second);
  return choice;
}

/// CUDA memory: a native transport if any works for the pair, else a staged one.
PairChoice chooseCudaPair(const std::vector<RankView>& ranks, const std::vector<Rule>& rules, int a, int b) {
  std::string nativeError;
  try {
    return chooseFor(ranks, rules, a, b, PB_MEM_CUDA);
  } catch (const Error& e) {
    nativeError = e.what();
  }
  try {
    PairChoice c = chooseFor(ranks, rules, a, b, kMemCudaStaged);
    c.staged = true;
    c.why += "; staged through pinned host buffers (no transport moves CUDA memory natively for this pair)";
    return c;
  } catch (const Error&) {
    throw Error(ErrorCode::Config, nativeError);
  }
}

PairChoice choosePair(const std::vector<RankView>& ranks, const std::vector<Rule>& rules, int a, int b,
                      uint32_t memType) {
  return memType == PB_MEM_CUDA ? chooseCudaPair(ranks, rules, a, b) : chooseFor(ranks, rules, a, b, memType);
}

}  // namespace

uint32_t advertisedMemTypes(uint32_t pluginMemTypes, bool coreCanStage) {
  const bool hostOnly = (pluginMemTypes & PB_MEM_HOST) && !(pluginMemTypes & PB_MEM_CUDA);
  return pluginMemTypes | (coreCanStage && hostOnly ? kMemCudaStaged : 0u);
}

bool coreCanStageCuda() {
#if defined(PLUGBOARD_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

bool peersMatch(const PeerMatch& m, int a, int b, const std::string& hostA, const std::string& hostB) {
  switch (m.kind) {
    case PeerMatch::Kind::Any: return true;
    case PeerMatch::Kind::SameHost: return hostA == hostB;
    case PeerMatch::Kind::DifferentHost: return hostA != hostB;
    case PeerMatch::Kind::Ranks:
      return (m.from.contains(a) && m.to.contains(b)) || (m.from.contains(b) && m.to.contains(a));
    case PeerMatch::Kind::Hosts: return has(m.hosts, hostA) && has(m.hosts, hostB);
  }
  return false;
}

void checkRulesUseLoaded(const std::vector<Rule>& rules, const std::vector<RankView>& ranks) {
  std::vector<std::string> loaded = allTransports(ranks);
  for (const auto& rule : rules)
    for (const auto& name : rule.use)
      if (!has(loaded, name))
        throw Error(ErrorCode::Config, rule.origin + ": rule uses transport '" + name + "', which no rank loaded");
}

std::map<std::pair<int, int>, PairChoice> selectTransports(const std::vector<RankView>& ranks,
                                                           const std::vector<Rule>& rules, uint32_t memType) {
  std::map<std::pair<int, int>, PairChoice> out;
  const int n = static_cast<int>(ranks.size());
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) out[{a, b}] = choosePair(ranks, rules, a, b, memType);
  return out;
}

const char* memTypeName(uint32_t memType) { return memType == PB_MEM_CUDA ? "CUDA" : "host"; }

}  // namespace plugboard
