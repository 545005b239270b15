// The plugin context: host services, settings, registered regions, and the
// last error for last_error().
#pragma once

#include <plugboard/transport.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "region.hpp"

namespace shm {

/// Settings, declared at init as shm.<key> (PLUGBOARD_SHM_<KEY>).
struct Settings {
  uint64_t ringBytes = 4 << 20;  ///< ring_bytes: size of each receiving ring.
  uint64_t spinUs = 20;          ///< spin_us: how long a receiver polls before it sleeps.
};

/// One per pb_plugin_ctx.
class Context {
 public:
  /// Checks the host's ABI, declares and reads the settings. Throws Error.
  explicit Context(const pb_host_services_v1* host);

  /// This process's rank.
  int rank() const { return host_->rank; }
  /// This host's name as the core identifies it.
  std::string hostname() const { return host_->hostname ? host_->hostname : "?"; }
  /// Settings read at init.
  const Settings& settings() const { return settings_; }
  /// Registered regions.
  Regions& regions() { return regions_; }
  /// Logs one line through the core.
  void log(pb_log_level level, const std::string& message) const;
  /// Tells the core a signal landed (a no-op on cores older than ABI 1.1).
  void signalLanded() const;
  /// Stores the reason of the last failure.
  void setError(const std::string& reason);
  /// The reason of the last failure ("" if none).
  std::string lastError() const;
  /// Open connections; finalize refuses while any are.
  std::atomic<int> connections{0};

 private:
  void declareSettings();
  uint64_t readInt(const char* key, uint64_t lo, uint64_t hi) const;
  const pb_host_services_v1* host_;
  Settings settings_;
  Regions regions_;
  mutable std::mutex errorMu_;
  std::string error_;
};

}  // namespace shm
