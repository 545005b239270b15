#include "communicator/local_setup.hpp"

#include <unistd.h>

#include "communicator/wait.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"
#include "plugins/plugin_loader.hpp"

namespace plugboard {
namespace {

std::string localHostName() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

std::unique_ptr<Config> resolveConfig(CommunicatorOptions& options) {
  auto c = std::make_unique<Config>(options.config ? *options.config
                                    : options.configPath.empty() ? Config::fromEnvironment()
                                                                 : Config::fromYamlFile(options.configPath));
  for (const auto& [name, value] : options.overrides) c->set(name, value);
  return c;
}

}  // namespace

void prepareLocalSetup(CommunicatorOptions& options, int rank, int nranks, LocalSetup& out) {
  out.config = resolveConfig(options);
  Config& config = *out.config;
  logConfigure(config.getString("debug"), config.getString("debug_subsys"), config.getString("debug_file"),
               config.getBool("debug_timestamps"));
  double seconds = config.getDouble("timeout");
  if (seconds <= 0)
    throw Error(ErrorCode::Config, "setting 'timeout' must be positive, got " + config.getString("timeout"));
  out.timeout = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  const int64_t yields = config.getInt("wait_yield_polls");
  if (yields < 0 || yields > 1000000)
    throw Error(ErrorCode::Config, "setting 'wait_yield_polls' must be between 0 and 1000000, got " +
                                       config.getString("wait_yield_polls"));
  gWaitYieldPolls.store(static_cast<unsigned>(yields), std::memory_order_relaxed);
  std::string hostId = config.getString("host_id");
  out.host = hostId.empty() ? localHostName() : hostId;
  LocalIdentity self{rank, nranks, out.host};
  out.plugins = loadTransports(config, self, &out.skipped);
  std::vector<std::string> names;
  for (const auto& p : out.plugins) names.push_back(p->name());
  config.checkPluginSectionsUsed(names);
  config.checkRulesAgainst(config.getList("transports"));
  config.logOverrides();
  for (const auto& v : config.unknownEnvironmentVariables())
    PB_LOG(Warn, "CONFIG", "ignoring unknown environment variable " << v);
}

}  // namespace plugboard
