#include "plugboard/gpu/semaphore.hpp"

#include "communicator/communicator_impl.hpp"
#include "gpu/cuda_check.hpp"

namespace plugboard {

struct Device2DeviceSemaphore::Impl {
  std::shared_ptr<Connection> connection;
  uint64_t* counters = nullptr;  // device: [0] inbound, [1] expected
  uint32_t* flags = nullptr;     // mapped host: [0] abort, [1] error
  uint32_t* flagsDev = nullptr;
  uint64_t* remoteInbound = nullptr;
  RegisteredMemory local;
  RemoteMemory remote;

  ~Impl() {
    remote = RemoteMemory();  // release the mapping before freeing anything it refers to
    local = RegisteredMemory();
    if (counters) cudaFree(counters);
    if (flags) cudaFreeHost(flags);
  }
};

Device2DeviceSemaphore::Device2DeviceSemaphore(Communicator& comm, std::shared_ptr<Connection> connection)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (!connection) throw Error(ErrorCode::InvalidUsage, "Device2DeviceSemaphore needs a connection");
  if (!connection->mapsPeerMemory())
    throw Error(ErrorCode::InvalidUsage, "Device2DeviceSemaphore with rank " + std::to_string(connection->remoteRank()) +
                                             ": transport " + connection->transport() +
                                             " does not map peer memory (connect for MemoryKind::Cuda over cudaipc)");
  m.connection = std::move(connection);
  PB_CUDA_CHECK(cudaMalloc(&m.counters, 2 * sizeof(uint64_t)));
  PB_CUDA_CHECK(cudaMemset(m.counters, 0, 2 * sizeof(uint64_t)));
  PB_CUDA_CHECK(cudaHostAlloc(&m.flags, 2 * sizeof(uint32_t), cudaHostAllocMapped));
  m.flags[0] = m.flags[1] = 0;
  PB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m.flagsDev), m.flags, 0));
  m.local = comm.registerMemory(m.counters, sizeof(uint64_t), MemoryKind::Cuda);
  const int peer = m.connection->remoteRank();
  comm.impl_->sendMemoryTagged(m.local, peer, kTagSemaphore);
  m.remote = comm.impl_->recvMemoryTagged(peer, kTagSemaphore);
  m.remoteInbound = static_cast<uint64_t*>(m.connection->remotePointer(m.remote));
}

Device2DeviceSemaphore::~Device2DeviceSemaphore() = default;

Device2DeviceSemaphoreDeviceHandle Device2DeviceSemaphore::deviceHandle() const {
  const Impl& m = *impl_;
  return {m.counters, m.remoteInbound, m.counters + 1, m.flagsDev, m.flagsDev + 1};
}

Connection& Device2DeviceSemaphore::connection() const { return *impl_->connection; }
void Device2DeviceSemaphore::abort() { __atomic_store_n(&impl_->flags[0], 1u, __ATOMIC_RELEASE); }
uint32_t Device2DeviceSemaphore::deviceError() const { return __atomic_load_n(&impl_->flags[1], __ATOMIC_ACQUIRE); }

}  // namespace plugboard
