/// @file memory_channel.hpp
/// Host side of a MemoryChannel: kernels load and store a peer's buffer
/// directly (CUDA IPC mapping), no proxy. Requires CUDA.
#pragma once

#include <memory>

#include "plugboard/gpu/memory_channel_device.hpp"
#include "plugboard/gpu/semaphore.hpp"

namespace plugboard {

/// A local registered buffer, the peer's mapped buffer and a semaphore.
class MemoryChannel {
 public:
  /// local must be CUDA memory registered on this rank; remote the peer's,
  /// imported on the semaphore's connection. Throws Error(InvalidUsage)
  /// when the connection does not map peer memory.
  MemoryChannel(std::shared_ptr<Device2DeviceSemaphore> semaphore, RegisteredMemory local, RemoteMemory remote);
  /// Plain handle for kernels.
  MemoryChannelDeviceHandle deviceHandle() const;

 private:
  std::shared_ptr<Device2DeviceSemaphore> semaphore_;
  RegisteredMemory local_;
  RemoteMemory remote_;
  char* remotePtr_ = nullptr;
};

}  // namespace plugboard
