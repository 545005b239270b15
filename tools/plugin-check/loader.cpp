#include "loader.hpp"

#include <dlfcn.h>

#include <stdexcept>
#include <utility>
#include <vector>

namespace plugboard::check {

PluginLibrary::PluginLibrary(const std::string& path) : path_(path) {
  dlerror();
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = dlerror();
    throw std::runtime_error("dlopen(" + path + ", RTLD_NOW | RTLD_LOCAL) failed: " + (why ? why : "unknown reason"));
  }
  entry_ = reinterpret_cast<pb_transport_entry_v1_fn>(dlsym(handle_, PB_TRANSPORT_ENTRY_SYMBOL_V1));
}

PluginLibrary::~PluginLibrary() {
  if (handle_) dlclose(handle_);
}

const pb_transport_v1* PluginLibrary::table(uint32_t major, uint32_t minor) const {
  return entry_ ? entry_(major, minor) : nullptr;
}

std::string statusName(pb_status status) {
  switch (status) {
    case PB_OK: return "PB_OK";
    case PB_IN_PROGRESS: return "PB_IN_PROGRESS";
    case PB_ERR_INVALID: return "PB_ERR_INVALID";
    case PB_ERR_UNSUPPORTED: return "PB_ERR_UNSUPPORTED";
    case PB_ERR_SYSTEM: return "PB_ERR_SYSTEM";
    case PB_ERR_REMOTE: return "PB_ERR_REMOTE";
    case PB_ERR_TIMEOUT: return "PB_ERR_TIMEOUT";
    case PB_ERR_NOMEM: return "PB_ERR_NOMEM";
    case PB_ERR_VERSION: return "PB_ERR_VERSION";
    case PB_ERR_INTERNAL: return "PB_ERR_INTERNAL";
  }
  return "status " + std::to_string(int(status));
}

std::string missingFunctions(const pb_transport_v1& t) {
  const std::vector<std::pair<const char*, bool>> fields = {
      {"init", t.init != nullptr},
      {"properties", t.properties != nullptr},
      {"can_connect", t.can_connect != nullptr},
      {"setup", t.setup != nullptr},
      {"proxy_connect", t.proxy_connect != nullptr},
      {"register_memory", t.register_memory != nullptr},
      {"pack_rkey", t.pack_rkey != nullptr},
      {"import_rkey", t.import_rkey != nullptr},
      {"release_rkey", t.release_rkey != nullptr},
      {"deregister_memory", t.deregister_memory != nullptr},
      {"proxy_progress", t.proxy_progress != nullptr},
      {"flush", t.flush != nullptr},
      {"free", t.free != nullptr},
      {"finalize", t.finalize != nullptr},
      {"last_error", t.last_error != nullptr}};
  std::string missing;
  for (const auto& [name, present] : fields)
    if (!present) missing += (missing.empty() ? "" : ", ") + std::string(name);
  return missing;
}

std::string lastError(const pb_transport_v1& t, pb_plugin_ctx* ctx) {
  if (!t.last_error) return "(no last_error function)";
  const char* e = t.last_error(ctx);
  return e ? std::string(e) : std::string("(last_error returned NULL)");
}

}  // namespace plugboard::check
