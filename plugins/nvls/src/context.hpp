// The plugin context: host services, the resolved settings and the number
// of live groups. One per loaded plugin per communicator; the core's
// pb_plugin_ctx*. Creating it touches no CUDA: the driver is resolved on
// the first group call that passes the gate.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <atomic>
#include <string>

#include "entry.hpp"
#include "settings.hpp"

namespace plugboard::nvls {

/// State shared by every group of one plugin instance.
class Context : public transport_cxx::ErrorSlot {
 public:
  /// Checks the host table, declares and reads the settings. Throws Error
  /// (PB_ERR_INVALID for a bad handle_type).
  explicit Context(const pb_host_services_v1* host);

  /// The nvls.* settings as resolved at init.
  const NvlsSettings& settings() const { return settings_; }
  /// The real driver, resolved on first call (cuda_api.hpp).
  const DriverSource& driver() const { return driver_; }
  /// This process's rank in the communicator.
  int rank() const { return host_.rank(); }
  /// Logs one line through the core.
  void log(pb_log_level level, const std::string& message) const { host_.log(level, message); }

  /// Counts live groups, so finalize can refuse while any remain.
  void groupOpened() { ++groups_; }
  /// See groupOpened().
  void groupClosed() { --groups_; }
  /// Live groups.
  int groups() const { return groups_.load(); }

 private:
  transport_cxx::HostServices host_;
  NvlsSettings settings_;
  DriverSource driver_;
  std::atomic<int> groups_{0};
};

}  // namespace plugboard::nvls
