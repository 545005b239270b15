// The transport the faulty plugin wraps: loaded with dlopen the way the core
// loads a plugin, initialised with host services that forward to the
// core's (its settings become faulty.inner_<key>), and called through
// helpers that turn its failures into Errors naming it.
#pragma once

#include <plugboard/transport.h>

#include <string>

namespace plugboard::faulty {

/// One loaded and initialised inner transport. Not copyable; the library
/// stays loaded for the life of the process (its threads may outlive a
/// context by a moment, and other contexts may share it).
class InnerTransport {
 public:
  /// spec: a transport name (libplugboard-<spec>.so beside this plugin) or a
  /// path. outer: the core's services. Error naming the file on failure.
  InnerTransport(const std::string& spec, const pb_host_services_v1& outer);
  ~InnerTransport();
  InnerTransport(const InnerTransport&) = delete;
  InnerTransport& operator=(const InnerTransport&) = delete;

  /// The inner table and context.
  const pb_transport_v1& api() const { return *api_; }
  pb_plugin_ctx* ctx() const { return ctx_; }
  /// The inner transport's name ("ethernet").
  const std::string& name() const { return name_; }
  /// True when the inner table has write_signal.
  bool hasWriteSignal() const;

  /// Throws Error(status, "faulty(<name>) <what>: <inner's last_error>") unless status is PB_OK.
  void check(pb_status status, const char* what) const;
  /// Same, for proxy_connect: PB_IN_PROGRESS is no error; returns true on PB_OK.
  bool checkConnect(pb_status status) const;

  /// Prefix of the inner transport's settings under faulty's ("inner_").
  static constexpr const char* kSettingPrefix = "inner_";

 private:
  static void log(void* core, pb_log_level level, const char* message);
  static pb_status declare(void* core, const pb_setting_decl_v1* decl);
  static pb_status get(void* core, const char* key, char* buf, size_t len, size_t* needed);
  static void landed(void* core);

  const pb_host_services_v1& outer_;
  pb_host_services_v1 services_{};  ///< what the inner transport sees; core = this
  const pb_transport_v1* api_ = nullptr;
  pb_plugin_ctx* ctx_ = nullptr;
  std::string path_, name_;
};

}  // namespace plugboard::faulty
