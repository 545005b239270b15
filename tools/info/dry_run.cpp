#include "info/dry_run.hpp"

#include "selection/selector.hpp"

namespace plugboard::info {
namespace {

std::map<std::string, Reach> reachFrom(const LocalSetup& setup, const std::vector<std::string>& hosts, int a, int b) {
  std::map<std::string, Reach> out;
  int localRanks = 0;
  for (const auto& h : hosts) localRanks += h == hosts[a] ? 1 : 0;
  pb_peer_info_v1 info{sizeof(pb_peer_info_v1), a, b, hosts[a].c_str(), hosts[b].c_str(), hosts[a] == hosts[b],
                       0, localRanks};
  for (const auto& p : setup.plugins) {
    Reach r;
    char reason[256] = {0};
    if (p->api().can_connect(p->context(), &info, &r.cost, reason, sizeof(reason)) != PB_OK) {
      r.cost = -1;
      r.reason = "can_connect failed: " + p->lastError();
    } else {
      r.reason = reason;
    }
    out[p->name()] = r;
  }
  return out;
}

}  // namespace

void printSelection(const LocalSetup& setup, const std::vector<std::string>& hosts, std::ostream& out) {
  const int n = static_cast<int>(hosts.size());
  std::vector<RankView> views(n);
  for (int a = 0; a < n; ++a) {
    views[a].host = hosts[a];
    for (const auto& p : setup.plugins) {
      views[a].transports.push_back(p->name());
      views[a].memTypes[p->name()] = advertisedMemTypes(p->properties().mem_types, coreCanStageCuda());
    }
    for (int b = 0; b < n; ++b)
      if (a != b) views[a].reach[b] = reachFrom(setup, hosts, a, b);
  }
  checkRulesUseLoaded(setup.config->rules(), views);
  bool anyCuda = false;
  for (const auto& p : setup.plugins)
    anyCuda = anyCuda || (advertisedMemTypes(p->properties().mem_types, coreCanStageCuda()) & (PB_MEM_CUDA | kMemCudaStaged));
  for (uint32_t memType : {uint32_t(PB_MEM_HOST), uint32_t(PB_MEM_CUDA)}) {
    if (memType == PB_MEM_CUDA && !anyCuda) continue;
    out << "  " << memTypeName(memType) << " memory:\n";
    for (const auto& [pair, c] : selectTransports(views, setup.config->rules(), memType))
      out << "    rank " << pair.first << " (" << hosts[pair.first] << ") <-> rank " << pair.second << " ("
          << hosts[pair.second] << ") via " << c.transport << (c.staged ? " staged" : "") << " (" << c.why << ")\n";
  }
}

}  // namespace plugboard::info
