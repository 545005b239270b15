// plugboard-info: what Plugboard would do here, without starting a job.
//   plugboard-info [--config FILE] [--hosts a,a,b,b] [--rank R]
//   plugboard-info --plan FILE    (check an execution plan and summarise it)
// Lists the plugins found, every setting with its value and source, and a
// dry run of the per-pair selection. Exits non-zero on any error a
// communicator would raise with the same settings.
#include <algorithm>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <vector>

#include "collectives/plan_rules.hpp"
#include "communicator/local_setup.hpp"
#include "config/value_parse.hpp"
#include "info/dry_run.hpp"
#include "plugboard/error.hpp"
#include "plugboard/plan.hpp"
#include "plugins/plugin_loader.hpp"

using namespace plugboard;

namespace {

struct Args {
  std::string config;
  std::vector<std::string> hosts;
  int rank = 0;
  std::string plan;
};

void usage(std::ostream& out) {
  out << "usage: plugboard-info [--config FILE] [--hosts h0,h1,...] [--rank R]\n"
         "  --config FILE   YAML settings to check (default: PLUGBOARD_CONFIG, else defaults + env)\n"
         "  --hosts LIST    host of each rank for a dry run of the transport selection\n"
         "  --rank R        rank whose view to load plugins as (default 0)\n"
         "       plugboard-info --plan FILE\n"
         "  --plan FILE     check an execution plan (docs/execution-plans.md) and summarise it\n";
}

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(ErrorCode::InvalidUsage, arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--config") a.config = value();
    else if (arg == "--hosts") a.hosts = splitList(value(), ",");
    else if (arg == "--rank") a.rank = static_cast<int>(parseIntValue(value()));
    else if (arg == "--plan") a.plan = value();
    else if (arg == "-h" || arg == "--help") { usage(std::cout); std::exit(0); }
    else throw Error(ErrorCode::InvalidUsage, "unknown argument '" + arg + "' (see --help)");
  }
  return a;
}

/// A group transport's answer for a group of every rank on CUDA device 0
/// (group_can_create creates nothing): "yes" or "no: <reason>".
std::string groupAnswer(const TransportPlugin& p, int nranks) {
  const pb_transport_v1& t = p.api();
  if (!PB_HAS_FIELD(&t, pb_transport_v1, group_can_create) || !t.group_can_create) return "no: no group entries";
  std::vector<int> ranks;
  for (int r = 0; r < std::max(nranks, 2); ++r) ranks.push_back(r);
  pb_group_desc_v1 desc{sizeof(desc), 0, static_cast<int>(ranks.size()), ranks.data(), 0, 1 << 20, nullptr};
  int cost = -1;
  char reason[512] = {0};
  if (t.group_can_create(p.context(), &desc, &cost, reason, sizeof(reason)) != PB_OK)
    return "no: group_can_create failed: " + p.lastError();
  return cost >= 0 ? "yes (SwitchChannel multicast)" : std::string("no: ") + reason;
}

/// The plugin's own account of what it found (describe, ABI 1.5), a line each.
void printDescription(const TransportPlugin& p) {
  std::string text;
  try {
    text = p.describe();
  } catch (const Error& e) {
    text = std::string("describe failed: ") + e.what();
  }
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) std::cout << "             " << line << "\n";
}

/// Returns the names that load when named.
std::vector<std::string> printPlugins(const std::vector<std::string>& dirs, int rank, int nranks) {
  std::vector<std::string> loadable;
  std::cout << "Plugins (search path:";
  for (const auto& d : dirs) std::cout << " " << d;
  std::cout << ")\n";
  for (const auto& name : discoverPlugins(dirs)) {
    Config scratch = Config::fromYamlText("", "<probe>");
    try {
      auto p = loadTransport(name, dirs, scratch, LocalIdentity{rank, nranks, "probe"});
      const auto& pr = p->properties();
      std::cout << "  " << std::left << std::setw(10) << name << " " << p->path() << "\n"
                << "             version " << p->version() << ", ABI " << p->abiVersion() << ", memory:"
                << (pr.mem_types & PB_MEM_HOST ? " host" : "") << (pr.mem_types & PB_MEM_CUDA ? " cuda" : "")
                << ", caps:" << (pr.flags & PB_CAP_ONE_SIDED_WRITE ? " write" : "")
                << (pr.flags & PB_CAP_ATOMIC_SIGNAL ? " signal" : "") << (pr.flags & PB_CAP_NEEDS_PROXY ? " proxy" : "")
                << (pr.flags & PB_CAP_SAME_HOST_ONLY ? " same-host-only" : "")
                << (pr.flags & PB_CAP_GROUP ? " group" : "") << ", ~" << pr.bandwidth_gbps << " GB/s, ~"
                << pr.latency_us << " us\n";
      if (pr.flags & PB_CAP_GROUP) std::cout << "             group buffers: " << groupAnswer(*p, nranks) << "\n";
      printDescription(*p);
      loadable.push_back(name);
    } catch (const Error& e) {
      std::cout << "  " << std::left << std::setw(10) << name << " NOT LOADABLE: " << e.what() << "\n";
    }
  }
  return loadable;
}

/// The YAML `plans:` rules, each with the plan it names and whether a job of
/// nranks would use it.
void printPlanRules(const Config& config, int nranks) {
  std::cout << "Plans (" << config.planRules().size() << " rules, first match wins; " << nranks << " rank(s))\n";
  for (const PlanRule& r : config.planRules()) {
    std::cout << "  " << r.origin << ": " << r.mem << " " << r.collective << " of " << r.minBytes << " - "
              << (r.maxBytes == UINT64_MAX ? std::string("any") : std::to_string(r.maxBytes)) << " bytes: " << r.file;
    try {
      const Plan p = loadRulePlan(r);
      if (p.hasSwitches() && r.mem != "gpu") {
        std::cout << " UNUSABLE (host collectives' set-up fails): the plan has switch channels, which run on GPU "
                     "buffers only; give the rule mem: gpu\n";
        continue;
      }
      std::cout << " (plan " << p.name << ", " << p.nranks << " ranks; "
                << (p.nranks == nranks ? "used" : "not used at " + std::to_string(nranks) + " rank(s)") << ")\n";
    } catch (const Error& e) {
      std::cout << " UNUSABLE (the job fails at set-up): " << e.what() << "\n";
    }
  }
}

void printSettings(const Config& config) {
  std::cout << "Settings (name = value [source origin]: doc)\n";
  for (const auto& s : config.all()) {
    std::cout << "  " << s.decl.name << " = '" << s.value << "' [" << settingSourceName(s.source)
              << (s.origin.empty() ? "" : " " + s.origin) << "]: " << s.decl.doc << "\n";
  }
  std::cout << "Rules (" << config.rules().size() << ", first match wins)\n";
  for (const auto& r : config.rules()) {
    std::cout << "  " << r.origin << ": peers " << r.peers.describe() << " use";
    for (const auto& u : r.use) std::cout << " " << u;
    std::cout << "\n";
  }
}

/// --plan: loads (every check) and prints what each rank does.
int describePlan(const std::string& path) {
  const Plan p = loadPlan(path);
  std::cout << "plan " << path << ": " << p.name << ", " << p.collective << ", " << p.nranks << " ranks, "
            << (p.inPlace ? "in place" : "out of place") << ", protocol " << p.protocol << ", " << p.instances
            << " instance(s), chunks input " << p.inputChunks << " / output " << p.outputChunks << " / scratch "
            << p.scratchChunks << "\n";
  for (int r = 0; r < p.nranks; ++r) {
    size_t ops = 0;
    for (const auto& tb : p.ranks[r].threadblocks) ops += tb.ops.size();
    std::cout << "  rank " << r << ": " << p.ranks[r].channels.size() << " channel(s), "
              << p.ranks[r].threadblocks.size() << " thread block(s), " << ops << " operation(s)\n";
  }
  std::cout << "checked: structure, bounds, channels and signal/wait pairing\n";
  return 0;
}

int run(const Args& args) {
  if (!args.plan.empty()) return describePlan(args.plan);
  int nranks = args.hosts.empty() ? 1 : static_cast<int>(args.hosts.size());
  CommunicatorOptions options;
  options.configPath = args.config;
  LocalSetup setup;
  std::cout << "Plugboard " << libraryVersion() << ", transport ABI " << coreAbiVersion() << "\n";
  const std::vector<std::string> loadable = printPlugins(
      pluginSearchDirs(args.config.empty() ? Config::fromEnvironment() : Config::fromYamlFile(args.config)), args.rank,
      nranks);
  prepareLocalSetup(options, args.rank, nranks, setup);
  std::cout << "Loaded for this configuration:";
  for (const auto& p : setup.plugins) std::cout << " " << p->name();
  std::cout << "\n";
  // Plugins that start when named but declined under auto (loaded_by_auto).
  for (const SkippedTransport& s : setup.skipped)
    if (std::find(loadable.begin(), loadable.end(), s.name) != loadable.end())
      std::cout << "Not loaded for this configuration: " << s.name << ": " << s.why << "\n";
  printSettings(*setup.config);
  printPlanRules(*setup.config, nranks);
  if (!args.hosts.empty()) {
    std::cout << "Selection dry run for " << nranks << " ranks\n";
    info::printSelection(setup, args.hosts, std::cout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parseArgs(argc, argv));
  } catch (const Error& e) {
    std::cerr << "plugboard-info: " << errorCodeName(e.code()) << ": " << e.what() << "\n";
    return e.code() == ErrorCode::InvalidUsage ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "plugboard-info: " << e.what() << "\n";
    return 1;
  }
}
