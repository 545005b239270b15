// One dlopen'ed plugin file: its handle and its ABI v1 function table.
#pragma once

#include <plugboard/transport.h>

#include <string>

namespace plugboard {

/// Owns a dlopen handle (closed on destruction) and the table its entry
/// symbol returned. Construction checks the ABI both ways.
class PluginLibrary {
 public:
  /// Opens path with RTLD_NOW | RTLD_LOCAL and calls its entry symbol.
  /// Throws Error(Plugin) whose message says what failed: dlerror() text, a
  /// missing entry symbol, or both ABI versions on a mismatch.
  explicit PluginLibrary(const std::string& path);
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  /// The plugin's function table (never null).
  const pb_transport_v1& table() const { return *table_; }
  /// The file it was loaded from.
  const std::string& path() const { return path_; }

 private:
  void checkTable();
  void* handle_ = nullptr;
  const pb_transport_v1* table_ = nullptr;
  std::string path_;
};

/// "major.minor" of the ABI this core speaks.
std::string coreAbiVersion();

}  // namespace plugboard
