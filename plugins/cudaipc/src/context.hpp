// The plugin context: host services, this process's identity, the GPUs it
// has touched, the registry of exported regions, the cache of imported ones
// and the last error. One per loaded plugin per communicator; the core's
// pb_plugin_ctx*.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cuda_api.hpp"
#include "memory.hpp"

namespace plugboard::cudaipc {

/// can_connect's cost for a same-host peer: the cheapest path there is
/// (ethernet is 100; RDMA transports sit in between).
constexpr int kConnectCost = 10;

/// The far end of a connection (the adapter's).
using PeerInfo = transport_cxx::PeerInfo;

/// Who this process is, as far as CUDA IPC cares: two processes can share
/// GPU memory only on one machine (same kernel: same boot id), and pidfd
/// needs both in one PID namespace.
struct ProcessIdentity {
  uint32_t pid = 0;           ///< getpid() at context creation.
  uint64_t machine = 0;       ///< FNV-1a of /proc/sys/kernel/random/boot_id (hostname if unreadable).
  uint64_t pidNamespace = 0;  ///< Inode of /proc/self/ns/pid (0 if unknown).

  /// This process, now.
  static ProcessIdentity current();
};

/// A GPU this context has used: its ordinal, retained primary context and
/// the identity peers learn from the address blob.
struct DeviceInfo {
  int ordinal = -1;                 ///< CUDA runtime/driver ordinal in this process.
  CUcontext primary = nullptr;      ///< Retained primary context (released by ~Context).
  std::array<uint8_t, 16> uuid{};   ///< GPU UUID.
  std::array<char, 16> pciBusId{};  ///< "0000:18:00.0", NUL-padded.

  /// "GPU 1 (0000:18:00.0)", for messages.
  std::string describe() const;
};

/// State shared by every connection and region of one plugin instance.
class Context : public transport_cxx::ErrorSlot {
 public:
  /// Checks the host table, that CUDA has a device and that the driver has
  /// every function the plugin needs. Throws Error (PB_ERR_UNSUPPORTED with
  /// "no CUDA device: ..." on a machine without GPU or driver).
  explicit Context(const pb_host_services_v1* host);
  /// Closes what is still imported and releases the primary contexts.
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /// This process's rank.
  int rank() const { return host_.rank(); }
  /// This host's name as the core identifies it.
  const std::string& hostname() const { return host_.hostname(); }
  /// "rank N (host H)" for this process.
  std::string describeSelf() const;
  /// This process's identity (pid, machine, PID namespace).
  const ProcessIdentity& self() const { return self_; }
  /// Number of CUDA devices visible to this process.
  int deviceCount() const { return deviceCount_; }
  /// The GPU with this ordinal, retaining its primary context on first use
  /// (which creates it if nobody has). Thread-safe; the reference stays
  /// valid until the context is destroyed. Throws Error.
  const DeviceInfo& device(int ordinal);
  /// Ordinal of the GPU whose context is current on the calling thread, or
  /// -1 when none is.
  int currentDevice() const;
  /// A new export id, never reused within this process.
  uint64_t nextExportId() { return exportIdBase_ + exportCounter_.fetch_add(1); }

  /// Regions registered through this context.
  ExportRegistry& exports() { return exports_; }
  /// Peers' regions imported through this context's connections.
  ImportCache& imports() { return imports_; }

  /// Logs one line through the core.
  void log(pb_log_level level, const std::string& message) const { host_.log(level, message); }

  /// Counts live connections, so finalize can refuse while any remain.
  void connectionOpened() { ++connections_; }
  /// See connectionOpened().
  void connectionClosed() { --connections_; }
  /// Live connections.
  int connections() const { return connections_.load(); }

 private:
  transport_cxx::HostServices host_;
  ProcessIdentity self_;
  int deviceCount_ = 0;
  uint64_t exportIdBase_ = 0;
  std::atomic<uint64_t> exportCounter_{0};

  std::mutex devicesMu_;
  std::map<int, std::unique_ptr<DeviceInfo>> devices_;

  // ~Context empties both before it releases the primary contexts: closing
  // an imported mapping or an export needs its device's context.
  ExportRegistry exports_;
  ImportCache imports_;

  std::atomic<int> connections_{0};
};

}  // namespace plugboard::cudaipc
