/// @file semaphore.hpp
/// Host side of a device-to-device semaphore over a connection whose
/// transport maps peer memory (cudaipc). Requires CUDA.
#pragma once

#include <memory>

#include "plugboard/communicator.hpp"
#include "plugboard/gpu/semaphore_device.hpp"

namespace plugboard {

/// Counters in device memory; the peer's inbound counter is mapped here.
class Device2DeviceSemaphore {
 public:
  /// Collective with the peer, which must construct its own at the same
  /// point. Throws Error(InvalidUsage) when the connection's transport
  /// does not map peer memory; Error(System) for a failed CUDA call.
  Device2DeviceSemaphore(Communicator& comm, std::shared_ptr<Connection> connection);
  ~Device2DeviceSemaphore();
  Device2DeviceSemaphore(const Device2DeviceSemaphore&) = delete;
  Device2DeviceSemaphore& operator=(const Device2DeviceSemaphore&) = delete;

  /// Plain handle for kernels.
  Device2DeviceSemaphoreDeviceHandle deviceHandle() const;
  /// The connection it was built on.
  Connection& connection() const;
  /// Makes every device wait on it give up.
  void abort();
  /// The first SemaphoreDeviceError a device wait recorded, or 0.
  uint32_t deviceError() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace plugboard
