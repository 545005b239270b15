#include "inner.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "error.hpp"

namespace plugboard::faulty {

namespace {

/// The directory this plugin was loaded from ("" if unknown).
std::string ownDirectory() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&ownDirectory), &info) || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// spec as a path, or libplugboard-<spec>.so in this plugin's directory,
/// else in its sibling "plugboard" (where the shipped transports live).
std::string libraryPath(const std::string& spec) {
  if (spec.find('/') != std::string::npos) return spec;
  const std::string dir = ownDirectory(), file = "/libplugboard-" + spec + ".so";
  if (access((dir + file).c_str(), F_OK) == 0) return dir + file;
  return dir + "/../plugboard" + file;
}

}  // namespace

InnerTransport::InnerTransport(const std::string& spec, const pb_host_services_v1& outer)
    : outer_(outer), path_(libraryPath(spec)) {
  FAULTY_CHECK(!spec.empty() && spec != "faulty", PB_ERR_INVALID,
               "faulty: setting inner='" + spec + "' must name another transport (e.g. ethernet) or a path");
  void* handle = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  FAULTY_CHECK(handle, PB_ERR_INVALID,
               "faulty: cannot load the inner transport '" + spec + "' from " + path_ + ": " + dlerror());
  auto entry = reinterpret_cast<pb_transport_entry_v1_fn>(dlsym(handle, PB_TRANSPORT_ENTRY_SYMBOL_V1));
  FAULTY_CHECK(entry, PB_ERR_INVALID, "faulty: " + path_ + " has no " + PB_TRANSPORT_ENTRY_SYMBOL_V1);
  api_ = entry(PB_TRANSPORT_ABI_MAJOR, PB_TRANSPORT_ABI_MINOR);
  FAULTY_CHECK(api_ && api_->abi_major == PB_TRANSPORT_ABI_MAJOR &&
                   PB_HAS_FIELD(api_, pb_transport_v1, last_error) && api_->init && api_->last_error,
               PB_ERR_VERSION, "faulty: " + path_ + " offers no usable transport ABI " +
                                   std::to_string(PB_TRANSPORT_ABI_MAJOR) + " table");
  name_ = api_->name ? api_->name : spec;
  std::memcpy(&services_, &outer, std::min(sizeof(services_), outer.struct_size));
  services_.struct_size = std::min(sizeof(services_), outer.struct_size);
  services_.core = this;
  services_.log = &InnerTransport::log;
  services_.declare_setting = &InnerTransport::declare;
  services_.get_setting = &InnerTransport::get;
  if (PB_HAS_FIELD(&services_, pb_host_services_v1, signal_landed))
    services_.signal_landed = outer.signal_landed ? &InnerTransport::landed : nullptr;
  const pb_status st = api_->init(&services_, &ctx_);
  if (st != PB_OK) {
    const char* why = api_->last_error(nullptr);
    throw Error(st, "faulty: init of the inner transport " + name_ + " failed: " + (why && *why ? why : "no reason"));
  }
}

InnerTransport::~InnerTransport() {
  if (ctx_ && api_->finalize) api_->finalize(ctx_);
}

bool InnerTransport::hasWriteSignal() const {
  return PB_HAS_FIELD(api_, pb_transport_v1, write_signal) && api_->write_signal;
}

void InnerTransport::check(pb_status status, const char* what) const {
  if (status == PB_OK) return;
  const char* why = api_->last_error(ctx_);
  throw Error(status, "faulty(" + name_ + ") " + what + ": " +
                          (why && *why ? why : "status " + std::to_string(int(status))));
}

bool InnerTransport::checkConnect(pb_status status) const {
  if (status == PB_IN_PROGRESS) return false;
  check(status, "proxy_connect");
  return true;
}

void InnerTransport::log(void* core, pb_log_level level, const char* message) {
  auto* self = static_cast<InnerTransport*>(core);
  if (!self->outer_.log) return;
  try {
    const std::string line = self->name_ + ": " + (message ? message : "");
    self->outer_.log(self->outer_.core, level, line.c_str());
  } catch (...) {  // out of memory: the line is lost, nothing else
  }
}

pb_status InnerTransport::declare(void* core, const pb_setting_decl_v1* decl) {
  auto* self = static_cast<InnerTransport*>(core);
  if (!decl || !decl->key || !self->outer_.declare_setting) return PB_ERR_INVALID;
  try {
    const std::string key = std::string(kSettingPrefix) + decl->key;
    pb_setting_decl_v1 renamed{};
    std::memcpy(&renamed, decl, std::min(sizeof(renamed), decl->struct_size));
    renamed.key = key.c_str();
    return self->outer_.declare_setting(self->outer_.core, &renamed);
  } catch (...) {
    return PB_ERR_NOMEM;
  }
}

pb_status InnerTransport::get(void* core, const char* key, char* buf, size_t len, size_t* needed) {
  auto* self = static_cast<InnerTransport*>(core);
  if (!key || !self->outer_.get_setting) return PB_ERR_INVALID;
  try {
    const std::string prefixed = std::string(kSettingPrefix) + key;
    return self->outer_.get_setting(self->outer_.core, prefixed.c_str(), buf, len, needed);
  } catch (...) {
    return PB_ERR_NOMEM;
  }
}

void InnerTransport::landed(void* core) {
  auto* self = static_cast<InnerTransport*>(core);
  self->outer_.signal_landed(self->outer_.core);
}

}  // namespace plugboard::faulty
