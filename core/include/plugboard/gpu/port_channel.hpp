/// @file port_channel.hpp
/// Host side of PortChannels: a service that owns the Fifo and a proxy
/// thread turning kernels' requests into transport writes, signals and
/// flushes. Requires CUDA. Any connection made for MemoryKind::Cuda works:
/// cudaipc moves device memory itself; host-only transports (ethernet,
/// libfabric, ucx) get it staged through pinned host slots by the core.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "plugboard/communicator.hpp"
#include "plugboard/gpu/port_channel_device.hpp"

namespace plugboard {

class PortChannelService;

/// One channel: a local buffer, the peer's buffer, and this side's
/// inbound counter that the peer's proxy signals.
class PortChannel {
 public:
  /// Plain handle for kernels.
  PortChannelDeviceHandle deviceHandle() const { return handle_; }

 private:
  friend class PortChannelService;
  PortChannelDeviceHandle handle_{};
};

/// The proxy for PortChannels of one communicator on the current device.
class PortChannelService {
 public:
  /// Allocates the Fifo on the current CUDA device and starts the proxy thread.
  explicit PortChannelService(Communicator& comm, uint32_t fifoSize = 512);
  /// Stops the proxy thread (device waits then end in an abort error).
  ~PortChannelService();
  PortChannelService(const PortChannelService&) = delete;
  PortChannelService& operator=(const PortChannelService&) = delete;

  /// Adds a channel over connection from local to remote (imported on that
  /// connection). Collective with the peer, which adds its own in the same
  /// order. The channel's inbound counter is device memory where the
  /// transport maps peer memory, else pinned host memory mapped into the
  /// device (the transport lands signals there itself). Throws
  /// Error(InvalidUsage) for empty handles.
  PortChannel addChannel(std::shared_ptr<Connection> connection, RegisteredMemory local, RemoteMemory remote);
  /// Rethrows the proxy thread's error, if it stopped on one.
  void checkErrors() const;
  /// Ends every device wait on this service (Fifo pushes and syncs, channel
  /// waits) with an abort code; the proxy keeps running. Any thread;
  /// Communicator::abort() calls it.
  void abort();
  /// Triggers handled so far.
  uint64_t handled() const;
  /// One line on what the proxy is doing: requests handled, and the one in
  /// hand (which request, to which rank, for how long). Any thread.
  std::string describeState() const;
  /// Waits until the proxy handled every trigger pushed so far; call it
  /// once the kernels that push have ended. False (never throws) on
  /// timeout, on a proxy error or when the device cannot be read.
  bool waitIdle(std::chrono::milliseconds timeout) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace plugboard
