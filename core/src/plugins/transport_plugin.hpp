// A loaded and initialised transport: the C table plus its context, with
// every call's status turned into an Error that names the transport.
#pragma once

#include <plugboard/transport.h>

#include <memory>
#include <mutex>
#include <string>

#include "plugboard/config.hpp"
#include "plugboard/error.hpp"
#include "plugins/plugin_library.hpp"

namespace plugboard {

/// Identity of this process, handed to plugins through the host services.
struct LocalIdentity {
  int rank = 0;
  int nranks = 1;
  std::string host;
};

/// A plugin loaded only for `transports: auto` that refused init with
/// PB_ERR_UNSUPPORTED (loaded_by_auto): not a broken install, so the loader
/// passes its reason on as it is.
class PluginDeclined : public Error {
 public:
  explicit PluginDeclined(const std::string& why) : Error(ErrorCode::Plugin, why) {}
};

/// An initialised plugin. Declares its settings in config at construction;
/// config must outlive this object.
class TransportPlugin {
 public:
  /// Loads path, initialises the plugin and reads its properties. Throws
  /// Error(Plugin) with the plugin's last_error on failure. byAuto: loaded
  /// only because `transports` is `auto` (the host services' loaded_by_auto).
  TransportPlugin(const std::string& path, Config& config, const LocalIdentity& self, bool byAuto = false);
  ~TransportPlugin();
  TransportPlugin(const TransportPlugin&) = delete;
  TransportPlugin& operator=(const TransportPlugin&) = delete;

  /// The transport's name (from its table).
  const std::string& name() const { return name_; }
  /// The file it came from.
  const std::string& path() const { return library_.path(); }
  /// The plugin's own version string.
  std::string version() const;
  /// "major.minor" of the ABI the plugin was built with.
  std::string abiVersion() const;
  /// Properties read at init.
  const pb_transport_properties_v1& properties() const { return props_; }
  /// The function table.
  const pb_transport_v1& api() const { return library_.table(); }
  /// The plugin context.
  pb_plugin_ctx* context() const { return ctx_; }
  /// Throws Error(code) "transport <name>: <what> failed: <last_error>" unless
  /// status is PB_OK (or PB_IN_PROGRESS when allowed).
  void check(pb_status status, const std::string& what) const;
  /// The plugin's last_error text.
  std::string lastError() const;
  /// What the context found and chose (the optional describe entry, ABI
  /// 1.5), "" when the plugin has none; Error(Plugin) when it fails.
  std::string describe() const;

 private:
  PluginLibrary library_;
  std::string name_;
  pb_plugin_ctx* ctx_ = nullptr;
  pb_transport_properties_v1 props_{};

 public:
  struct Binding;  ///< Host-services state; public so the C callbacks can name it.

 private:
  std::unique_ptr<Binding> binding_;
};

/// Maps a plugin's status to the Error code used for it.
ErrorCode errorCodeForStatus(pb_status status);

}  // namespace plugboard
