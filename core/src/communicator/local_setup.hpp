// What each rank prepares on its own before talking to the others: the
// resolved settings and the loaded transports. Shared by the communicator
// and plugboard-info, so a dry run fails exactly where a job would.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "plugboard/communicator.hpp"
#include "plugins/plugin_loader.hpp"
#include "plugins/transport_plugin.hpp"

namespace plugboard {

/// The result of prepareLocalSetup. Plugins point at *config: keep them together.
struct LocalSetup {
  std::unique_ptr<Config> config;
  std::vector<std::unique_ptr<TransportPlugin>> plugins;  // destroyed before config
  std::vector<SkippedTransport> skipped;  ///< Found by `auto`, not loaded (failed or declined).
  std::chrono::milliseconds timeout{60000};
  std::string host;
  ~LocalSetup() { plugins.clear(); }
};

/// Resolves settings (options, YAML, environment), applies the log
/// settings, loads the transports and checks plugin sections. Throws Error.
void prepareLocalSetup(CommunicatorOptions& options, int rank, int nranks, LocalSetup& out);

}  // namespace plugboard
