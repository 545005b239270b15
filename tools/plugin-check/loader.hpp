// Loads a plugin exactly as the core does (dlopen RTLD_NOW | RTLD_LOCAL,
// dlsym of the entry symbol), without linking the core.
#pragma once

#include <plugboard/transport.h>

#include <memory>
#include <string>

namespace plugboard::check {

/// One dlopen handle, closed on destruction.
class PluginLibrary {
 public:
  /// Opens path with RTLD_NOW | RTLD_LOCAL. Throws std::runtime_error with
  /// the dlerror() text on failure.
  explicit PluginLibrary(const std::string& path);
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  /// The entry symbol, or nullptr when the file does not export it.
  pb_transport_entry_v1_fn entry() const { return entry_; }
  /// Calls the entry with (major, minor); nullptr when there is no entry or
  /// the plugin refuses that major.
  const pb_transport_v1* table(uint32_t major, uint32_t minor) const;
  /// The file it was opened from.
  const std::string& path() const { return path_; }

 private:
  void* handle_ = nullptr;
  pb_transport_entry_v1_fn entry_ = nullptr;
  std::string path_;
};

/// Symbolic name of a pb_status, e.g. "PB_ERR_INVALID" (or the number).
std::string statusName(pb_status status);

/// Minimum struct_size of a v1 table: every field up to last_error.
constexpr size_t kMinTableSize = offsetof(pb_transport_v1, last_error) + sizeof(pb_transport_v1::last_error);

/// The table fields this tool relies on, checked for NULL: returns a comma
/// list of missing mandatory functions ("" when none is missing).
std::string missingFunctions(const pb_transport_v1& t);

/// last_error(ctx) as a string, "(last_error returned NULL)" when it breaks
/// its contract.
std::string lastError(const pb_transport_v1& t, pb_plugin_ctx* ctx);

}  // namespace plugboard::check
