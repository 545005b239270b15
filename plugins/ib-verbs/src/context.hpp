// The plugin context: host services, settings, the port discovery chose,
// the opened device and protection domain, and the registry of local
// regions. One per loaded plugin per communicator (the core's
// pb_plugin_ctx*). Every connection has its own queue pairs and completion
// queue, so connections never share mutable state beyond the counters here.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cuda_memory.hpp"
#include "device.hpp"
#include "memory.hpp"
#include "shared_cq.hpp"
#include "settings.hpp"
#include "verbs.hpp"

namespace plugboard::ibverbs {

/// State shared by every connection and region of one plugin instance.
class Context : public transport_cxx::ErrorSlot {
 public:
  /// Checks the host table, declares and reads the settings, discovers the
  /// ports and opens the usable one nearest this rank's GPU (the first
  /// without a GPU; nic_affinity.hpp) with a protection domain. Throws
  /// Error(PB_ERR_UNSUPPORTED) naming every device and port skipped (and
  /// why) when none is usable, e.g. on a host without RDMA devices.
  explicit Context(const pb_host_services_v1* host);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const transport_cxx::HostServices& host() const { return host_; }
  const IbSettings& settings() const { return settings_; }
  /// The port every connection of this context uses.
  const PortInfo& port() const { return port_; }
  /// For plugboard-info (describe): every usable port, every skipped one
  /// and why, and the one taken and why; a line each (logged at INFO too).
  std::string describe() const;
  ibv_context* verbs() const { return device_.get(); }
  ibv_pd* pd() const { return pd_.get(); }
  /// The completion queue every connection's queue pairs share.
  SharedCq& cq() { return *cq_; }
  /// True when CUDA memory can be registered: as a dma-buf the core exports
  /// and the NIC takes (ibv_reg_dmabuf_mr), or by ibv_reg_mr where
  /// nvidia-peermem is loaded (cuda_memory.hpp).
  bool cudaMemory() const { return cuda_.any(); }

  /// Registers [ptr, ptr + size) with remote write, read and atomic access.
  LocalRegion* registerMemory(void* ptr, size_t size, pb_mem_type type);
  /// Deregisters a region of this context (Error(PB_ERR_INVALID) for another's).
  void deregisterMemory(LocalRegion* region);
  size_t regionCount() const;

  /// Open connections, for finalize's check.
  std::atomic<int>& connections() { return connections_; }
  /// "rank 3 (host h), mlx5_0 port 1": where this context is, for errors.
  std::string where() const;
  /// Logs through the core, prefixed with this rank.
  void log(pb_log_level level, const std::string& message) const;

 private:
  void declareSettings() const;
  /// Registers CUDA memory: dma-buf first, then nvidia-peermem; throws naming both.
  ibv_mr* registerCuda(void* ptr, size_t size, int access);

  transport_cxx::HostServices host_;
  IbSettings settings_;
  PortInfo port_;
  std::vector<std::string> report_;  // see describe()
  DeviceContext device_;
  ProtectionDomain pd_;
  std::unique_ptr<SharedCq> cq_;  // after device_: destroyed before it
  CudaMemoryPaths cuda_;      // how CUDA memory is registered, if at all
  mutable std::mutex mutex_;  // guards regions_ and nextRegion_
  std::set<LocalRegion*> regions_;
  uint64_t nextRegion_ = 1;
  std::atomic<int> connections_{0};
};

}  // namespace plugboard::ibverbs
