#include "plugins/plugin_library.hpp"

#include <dlfcn.h>

#include "plugboard/error.hpp"

namespace plugboard {

namespace {

/// Under ThreadSanitizer plugins stay mapped after dlclose: tools/tsan.sh
/// ignores the calls libfabric makes (called_from_lib), and TSan ends the
/// process when a library it matched that way is unloaded.
#if defined(__SANITIZE_THREAD__)
constexpr int kUnloadFlags = RTLD_NODELETE;
#else
constexpr int kUnloadFlags = 0;
#endif

}  // namespace

std::string coreAbiVersion() {
  return std::to_string(PB_TRANSPORT_ABI_MAJOR) + "." + std::to_string(PB_TRANSPORT_ABI_MINOR);
}

PluginLibrary::PluginLibrary(const std::string& path) : path_(path) {
  dlerror();
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | kUnloadFlags);
  if (!handle_) {
    const char* why = dlerror();
    throw Error(ErrorCode::Plugin, "dlopen failed: " + std::string(why ? why : "unknown reason"));
  }
  auto entry = reinterpret_cast<pb_transport_entry_v1_fn>(dlsym(handle_, PB_TRANSPORT_ENTRY_SYMBOL_V1));
  if (!entry) {
    dlclose(handle_);
    throw Error(ErrorCode::Plugin, std::string("no entry symbol '") + PB_TRANSPORT_ENTRY_SYMBOL_V1 +
                                       "' (not a Plugboard ABI v1 plugin, or built without exporting it)");
  }
  table_ = entry(PB_TRANSPORT_ABI_MAJOR, PB_TRANSPORT_ABI_MINOR);
  try {
    checkTable();
  } catch (...) {
    dlclose(handle_);
    throw;
  }
}

void PluginLibrary::checkTable() {
  if (!table_)
    throw Error(ErrorCode::Plugin, "the plugin refused core ABI " + coreAbiVersion() +
                                       " (its entry symbol returned no table)");
  if (table_->abi_major != PB_TRANSPORT_ABI_MAJOR)
    throw Error(ErrorCode::Plugin, "ABI mismatch: plugin ABI " + std::to_string(table_->abi_major) + "." +
                                       std::to_string(table_->abi_minor) + ", core ABI " + coreAbiVersion());
  if (table_->struct_size < offsetof(pb_transport_v1, last_error) + sizeof(table_->last_error))
    throw Error(ErrorCode::Plugin, "plugin function table is too small (" + std::to_string(table_->struct_size) +
                                       " bytes) for ABI " + coreAbiVersion());
  if (!table_->name || !table_->init || !table_->properties || !table_->can_connect || !table_->finalize ||
      !table_->last_error)
    throw Error(ErrorCode::Plugin, "plugin function table lacks a required entry (name, init, properties, "
                                   "can_connect, finalize, last_error)");
}

PluginLibrary::~PluginLibrary() {
  if (handle_) dlclose(handle_);
}

}  // namespace plugboard
