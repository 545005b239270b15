#include "plugins/plugin_loader.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>

#include "config/value_parse.hpp"
#include "plugins/plugin_probe.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

const char* kPrefix = "libplugboard-";
const char* kSuffix = ".so";

// Preference when "auto" loads whatever is installed: fastest first.
const std::vector<std::string>& knownTransports() {
  static const std::vector<std::string> names = {"cudaipc", "nvls", "ib-verbs", "ucx", "libfabric", "ethernet"};
  return names;
}

bool fileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string fileName(const std::string& name) { return kPrefix + name + kSuffix; }

std::string joined(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

std::vector<std::string> autoOrder(std::vector<std::string> found) {
  std::vector<std::string> out;
  for (const auto& k : knownTransports())
    if (std::find(found.begin(), found.end(), k) != found.end()) out.push_back(k);
  std::sort(found.begin(), found.end());
  for (const auto& f : found)
    if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  return out;
}

/// Plugins shipped in Plugboard's own directory are trusted; any other is
/// loaded in a probe child first (plugin_probe_timeout > 0). Throws
/// Error(Plugin) with what the probe saw when it crashed, exited or hung.
void probeUnlessShipped(const std::string& path, Config& config, const LocalIdentity& self) {
  const double seconds = config.getDouble("plugin_probe_timeout");
  const std::string shipped = defaultPluginDir();
  if (seconds <= 0 || (!shipped.empty() && path.rfind(shipped + "/", 0) == 0)) return;
  const std::string failure =
      probePlugin(path, config, self, std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  if (failure.empty()) return;
  // A broken install the user should hear about even when 'auto' skips it.
  PB_LOG(Warn, "INIT", "rank " << self.rank << ": transport plugin " << path << " " << failure);
  throw Error(ErrorCode::Plugin, "the plugin " + failure);
}

std::unique_ptr<TransportPlugin> tryPath(const std::string& name, const std::string& path, Config& config,
                                         const LocalIdentity& self, bool byAuto) {
  probeUnlessShipped(path, config, self);
  auto plugin = std::make_unique<TransportPlugin>(path, config, self, byAuto);
  if (plugin->name() != name)
    throw Error(ErrorCode::Plugin, "the file is named for '" + name + "' but the plugin calls itself '" +
                                       plugin->name() + "'");
  return plugin;
}

}  // namespace

std::string defaultPluginDir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&defaultPluginDir), &info) || !info.dli_fname) return "";
  std::string lib = info.dli_fname;
  size_t slash = lib.rfind('/');
  std::string dir = slash == std::string::npos ? "." : lib.substr(0, slash);
  return dir + "/" + PLUGBOARD_PLUGIN_SUBDIR;
}

std::vector<std::string> pluginSearchDirs(const Config& config) {
  std::vector<std::string> dirs = config.yamlPluginPath();
  const Setting& s = config.get("plugin_path");
  if (s.source == SettingSource::Env || s.source == SettingSource::Program)
    for (const auto& d : splitList(s.value, ":,")) dirs.push_back(d);
  std::string def = defaultPluginDir();
  if (!def.empty()) dirs.push_back(def);
  return dirs;
}

std::vector<std::string> discoverPlugins(const std::vector<std::string>& dirs) {
  std::vector<std::string> names;
  const std::string prefix = kPrefix, suffix = kSuffix;
  for (const auto& dir : dirs) {
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    while (dirent* e = readdir(d)) {
      std::string f = e->d_name;
      if (f.size() <= prefix.size() + suffix.size() || f.rfind(prefix, 0) != 0 ||
          f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      std::string name = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    closedir(d);
  }
  return names;
}

std::unique_ptr<TransportPlugin> loadTransport(const std::string& name, const std::vector<std::string>& dirs,
                                               Config& config, const LocalIdentity& self, bool byAuto) {
  std::vector<std::string> tried;
  for (const auto& dir : dirs) {
    std::string path = dir + "/" + fileName(name);
    if (!fileExists(path)) { tried.push_back(path + ": not found"); continue; }
    try {
      return tryPath(name, path, config, self, byAuto);
    } catch (const PluginDeclined&) {
      throw;  // its own reason says it all
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Config) throw;  // the user's value for one of its settings is wrong
      tried.push_back(path + ": " + e.what());
      break;  // a file that exists but fails is the answer; don't mask it with another copy
    }
  }
  bool onlyMissing = std::all_of(tried.begin(), tried.end(),
                                 [](const std::string& t) { return t.size() > 11 && t.compare(t.size() - 11, 11, ": not found") == 0; });
  if (onlyMissing) {
    try {
      return tryPath(name, fileName(name), config, self, byAuto);  // the dynamic linker's search
    } catch (const PluginDeclined&) {
      throw;  // as above: its own reason says it all
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Config) throw;
      tried.push_back(fileName(name) + " via the dynamic linker: " + e.what());
    }
  }
  std::vector<std::string> candidates = discoverPlugins(dirs);
  for (const auto& k : knownTransports()) candidates.push_back(k);
  std::string hint = closestMatch(name, candidates);
  std::string msg = "rank " + std::to_string(self.rank) + " (host " + self.host + "): transport '" + name +
                    "' could not be loaded" + (hint.empty() || hint == name ? "" : " (did you mean '" + hint + "'?)");
  for (const auto& t : tried) msg += "\n  tried " + t;
  msg += "\n  core ABI " + coreAbiVersion() + "; set plugin_path or PLUGBOARD_PLUGIN_PATH to add directories";
  throw Error(ErrorCode::Plugin, msg);
}

std::vector<std::unique_ptr<TransportPlugin>> loadTransports(Config& config, const LocalIdentity& self,
                                                             std::vector<SkippedTransport>* skipped) {
  std::vector<std::string> dirs = pluginSearchDirs(config);
  std::vector<std::string> names = config.getList("transports");
  bool automatic = names.size() == 1 && names[0] == "auto";
  if (automatic) names = autoOrder(discoverPlugins(dirs));
  // Loaded only because auto found it: no rule names it, and failover (which
  // may move a pair to any loaded transport) is off.
  auto byAuto = [&](const std::string& name) {
    if (!automatic || config.getBool("failover")) return false;
    for (const Rule& r : config.rules())
      if (std::find(r.use.begin(), r.use.end(), name) != r.use.end()) return false;
    return true;
  };
  std::vector<std::unique_ptr<TransportPlugin>> out;
  for (const auto& name : names) {
    if (std::count(names.begin(), names.end(), name) > 1)
      throw Error(ErrorCode::Config, config.get("transports").origin + ": transport '" + name + "' is listed twice");
    try {
      out.push_back(loadTransport(name, dirs, config, self, byAuto(name)));
      PB_LOG(Info, "INIT", "loaded transport " << name << " " << out.back()->version() << " (ABI "
                                               << out.back()->abiVersion() << ") from " << out.back()->path());
    } catch (const Error& e) {
      if (!automatic || e.code() == ErrorCode::Config) throw;
      PB_LOG(Info, "INIT", "skipping transport " << name << ": " << e.what());
      if (skipped) skipped->push_back({name, e.what()});
    }
  }
  if (out.empty())
    throw Error(ErrorCode::Plugin, "rank " + std::to_string(self.rank) + " (host " + self.host +
                                       "): no transport plugin could be loaded; searched " + joined(dirs, ", "));
  return out;
}

}  // namespace plugboard
