#include "plugboard/gpu/memory_channel.hpp"

#include "plugboard/error.hpp"

namespace plugboard {

MemoryChannel::MemoryChannel(std::shared_ptr<Device2DeviceSemaphore> semaphore, RegisteredMemory local,
                             RemoteMemory remote)
    : semaphore_(std::move(semaphore)), local_(std::move(local)), remote_(std::move(remote)) {
  if (!semaphore_ || !local_ || !remote_)
    throw Error(ErrorCode::InvalidUsage, "MemoryChannel needs a semaphore, a local and a remote memory");
  if (local_.kind() != MemoryKind::Cuda)
    throw Error(ErrorCode::InvalidUsage, "MemoryChannel: the local buffer must be CUDA memory");
  remotePtr_ = static_cast<char*>(semaphore_->connection().remotePointer(remote_));
}

MemoryChannelDeviceHandle MemoryChannel::deviceHandle() const {
  return MemoryChannelDeviceHandle{semaphore_->deviceHandle(), static_cast<char*>(local_.data()), remotePtr_};
}

}  // namespace plugboard
