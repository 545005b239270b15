// Finding and loading the transports a configuration asks for.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "plugboard/config.hpp"
#include "plugins/transport_plugin.hpp"

namespace plugboard {

/// Directories searched for libplugboard-<name>.so, in order: YAML
/// plugin_path, PLUGBOARD_PLUGIN_PATH, then <libdir>/plugboard next to the
/// core library. After them the dynamic linker's own search is tried.
std::vector<std::string> pluginSearchDirs(const Config& config);

/// <libdir>/plugboard, found from the core library's own location.
std::string defaultPluginDir();

/// Transport names of every libplugboard-<name>.so in dirs, without duplicates.
std::vector<std::string> discoverPlugins(const std::vector<std::string>& dirs);

/// A transport "auto" found but did not load (it failed or declined).
struct SkippedTransport {
  std::string name;
  std::string why;  ///< The loader's error.
};

/// Loads the transports named by the "transports" setting, in that order.
/// An explicitly named transport that cannot be loaded is an Error(Plugin)
/// with every path tried and why; with "auto" such failures are logged and
/// skipped, but finding none at all is an error. Under "auto" a plugin that
/// no rule names is told so (loaded_by_auto, unless failover is on) and may
/// decline, as the libfabric plugin does on hosts without a fabric device.
/// skipped (optional) receives each transport "auto" found but did not load.
std::vector<std::unique_ptr<TransportPlugin>> loadTransports(Config& config, const LocalIdentity& self,
                                                             std::vector<SkippedTransport>* skipped = nullptr);

/// Loads one transport by name; throws Error(Plugin) with the reason chain.
/// byAuto: loaded only because `transports` is `auto` (see loadTransports).
std::unique_ptr<TransportPlugin> loadTransport(const std::string& name, const std::vector<std::string>& dirs,
                                               Config& config, const LocalIdentity& self, bool byAuto = false);

}  // namespace plugboard
