#include "plugins/transport_plugin.hpp"

#include <cctype>
#include <cstring>

#include "communicator/signal_event.hpp"
#include "plugins/cuda_dmabuf.hpp"
#include "plugins/cuda_pci_bus_id.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

// What the host-service callbacks need: the registry and whose plugin it is.
struct TransportPlugin::Binding {
  Config* config = nullptr;
  std::string plugin;
  std::string subsys;
  std::string host;  // owned copy: services.hostname points here
  std::mutex mutex;  // the registry is not thread-safe; plugin threads may read
  std::exception_ptr declareError;  // a user error found while the plugin declared settings
  pb_host_services_v1 services{};
};

namespace {

void hostLog(void* core, pb_log_level level, const char* message) noexcept {
  auto* b = static_cast<TransportPlugin::Binding*>(core);
  LogLevel l = level == PB_LOG_WARN ? LogLevel::Warn : level == PB_LOG_INFO ? LogLevel::Info : LogLevel::Trace;
  if (logEnabled(l, b->subsys.c_str())) logWrite(l, b->subsys.c_str(), message ? message : "");
}

pb_status hostDeclare(void* core, const pb_setting_decl_v1* d) {
  auto* b = static_cast<TransportPlugin::Binding*>(core);
  if (!d || !d->key || !*d->key || std::strchr(d->key, '.')) return PB_ERR_INVALID;
  SettingDecl decl;
  decl.name = b->plugin + "." + d->key;
  decl.type = static_cast<SettingType>(d->type);
  decl.defaultValue = d->default_value ? d->default_value : "";
  decl.doc = d->doc ? d->doc : "";
  decl.rankLocal = PB_HAS_FIELD(d, pb_setting_decl_v1, rank_local) && d->rank_local != 0;
  std::lock_guard<std::mutex> lock(b->mutex);
  try {
    b->config->declare(decl);
  } catch (...) {
    // No exception may cross the C boundary. A wrong value in YAML/env is
    // the user's error: keep it and raise it after init returns.
    if (!b->declareError) b->declareError = std::current_exception();
    return PB_ERR_INVALID;
  }
  return PB_OK;
}

pb_status hostCudaDmabuf(void*, void* ptr, size_t size, int* fd, uint64_t* offset) noexcept {
  return exportCudaDmabuf(ptr, size, fd, offset);
}

pb_status hostCudaPciBusId(void*, char* buf, size_t len) noexcept { return cudaPciBusId(buf, len); }

pb_status hostGet(void* core, const char* key, char* buf, size_t len, size_t* needed) noexcept {
  auto* b = static_cast<TransportPlugin::Binding*>(core);
  if (!key || !needed) return PB_ERR_INVALID;
  std::lock_guard<std::mutex> lock(b->mutex);
  std::string name = b->plugin + "." + key;
  if (!b->config->has(name)) return PB_ERR_INVALID;
  const std::string& v = b->config->getString(name);
  *needed = v.size() + 1;
  if (!buf || len < *needed) return PB_ERR_NOMEM;
  std::memcpy(buf, v.c_str(), v.size() + 1);
  return PB_OK;
}

void hostSignalLanded(void*) noexcept { SignalEvent::instance().notify(); }

}  // namespace

ErrorCode errorCodeForStatus(pb_status status) {
  switch (status) {
    case PB_ERR_INVALID: return ErrorCode::InvalidUsage;
    case PB_ERR_REMOTE: return ErrorCode::Remote;
    case PB_ERR_TIMEOUT: return ErrorCode::Timeout;
    case PB_ERR_SYSTEM: return ErrorCode::System;
    case PB_ERR_INTERNAL: return ErrorCode::Internal;
    default: return ErrorCode::Plugin;
  }
}

TransportPlugin::TransportPlugin(const std::string& path, Config& config, const LocalIdentity& self, bool byAuto)
    : library_(path), name_(library_.table().name), binding_(std::make_unique<Binding>()) {
  binding_->config = &config;
  binding_->plugin = name_;
  binding_->subsys = name_;
  for (auto& c : binding_->subsys) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  pb_host_services_v1& s = binding_->services;
  s.struct_size = sizeof(s);
  s.abi_major = PB_TRANSPORT_ABI_MAJOR;
  s.abi_minor = PB_TRANSPORT_ABI_MINOR;
  s.core = binding_.get();
  s.log = hostLog;
  s.declare_setting = hostDeclare;
  s.get_setting = hostGet;
  s.signal_landed = hostSignalLanded;
  s.cuda_dmabuf_fd = hostCudaDmabuf;
  s.cuda_pci_bus_id = hostCudaPciBusId;
  s.loaded_by_auto = byAuto ? 1 : 0;
  s.rank = self.rank;
  s.nranks = self.nranks;
  binding_->host = self.host;
  s.hostname = binding_->host.c_str();
  pb_status st = api().init(&s, &ctx_);
  if (binding_->declareError) {
    if (st == PB_OK && ctx_) api().finalize(ctx_);
    std::rethrow_exception(binding_->declareError);
  }
  if (st != PB_OK) {
    std::string why = api().last_error(ctx_);
    if (why.empty()) why = "the plugin gave no reason";
    if (byAuto && st == PB_ERR_UNSUPPORTED) throw PluginDeclined("declined under transports: auto: " + why);
    throw Error(ErrorCode::Plugin, "init failed (status " + std::to_string(st) + "): " + why);
  }
  props_.struct_size = sizeof(props_);
  try {
    check(api().properties(ctx_, &props_), "properties");
  } catch (...) {
    api().finalize(ctx_);
    throw;
  }
}

TransportPlugin::~TransportPlugin() {
  if (ctx_) api().finalize(ctx_);
}

std::string TransportPlugin::version() const { return api().version ? api().version : "?"; }

std::string TransportPlugin::abiVersion() const {
  return std::to_string(api().abi_major) + "." + std::to_string(api().abi_minor);
}

std::string TransportPlugin::lastError() const {
  const char* e = api().last_error(ctx_);
  return e ? e : "";
}

std::string TransportPlugin::describe() const {
  const pb_transport_v1& t = api();
  if (!PB_HAS_FIELD(&t, pb_transport_v1, describe) || !t.describe) return "";
  size_t needed = 0;
  const pb_status probe = t.describe(ctx_, nullptr, 0, &needed);
  if (probe != PB_ERR_NOMEM) check(probe, "describe (asking for its length)");
  if (needed == 0 || needed > (1u << 20))
    throw Error(ErrorCode::Plugin, "transport " + name_ + ": describe asked for " + std::to_string(needed) +
                                       " bytes (1 to 1 MiB expected)");
  std::string text(needed, '\0');
  check(t.describe(ctx_, text.data(), text.size(), &needed), "describe");
  text.resize(std::strlen(text.c_str()));
  return text;
}

void TransportPlugin::check(pb_status status, const std::string& what) const {
  if (status == PB_OK) return;
  std::string why = lastError();
  throw Error(errorCodeForStatus(status), "transport " + name_ + ": " + what + " failed: " +
                                              (why.empty() ? "status " + std::to_string(status) : why));
}

}  // namespace plugboard
