#include "plugboard/gpu/fifo.hpp"

#include <algorithm>

#include "gpu/cuda_check.hpp"

namespace plugboard {

struct Fifo::Impl {
  uint32_t size = 0;
  ProxyTrigger* triggers = nullptr;     // pinned, mapped
  ProxyTrigger* triggersDev = nullptr;  // its device alias
  unsigned long long* head = nullptr;   // device
  uint64_t* tailHost = nullptr;         // pinned, mapped: the published tail
  uint64_t* tailDev = nullptr;          // its device alias
  unsigned long long* tailCache = nullptr;  // device: producers' lower bound of the tail
  uint32_t* flags = nullptr;            // pinned, mapped: [0] abort, [1] device error
  uint32_t* flagsDev = nullptr;
  uint64_t tail = 0;                    // the consumer's own count (one thread)

  ~Impl() {
    if (head) cudaFree(head);
    if (tailCache) cudaFree(tailCache);
    if (triggers) cudaFreeHost(triggers);
    if (tailHost) cudaFreeHost(tailHost);
    if (flags) cudaFreeHost(flags);
  }
};

Fifo::Fifo(uint32_t size) : impl_(std::make_unique<Impl>()) {
  if (size < 2) throw Error(ErrorCode::InvalidUsage, "Fifo size must be at least 2, got " + std::to_string(size));
  Impl& m = *impl_;
  m.size = size;
  PB_CUDA_CHECK(cudaHostAlloc(&m.triggers, sizeof(ProxyTrigger) * size, cudaHostAllocMapped));
  std::fill(m.triggers, m.triggers + size, ProxyTrigger{0, 0});
  PB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m.triggersDev), m.triggers, 0));
  PB_CUDA_CHECK(cudaHostAlloc(&m.flags, 2 * sizeof(uint32_t), cudaHostAllocMapped));
  m.flags[0] = m.flags[1] = 0;
  PB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m.flagsDev), m.flags, 0));
  PB_CUDA_CHECK(cudaHostAlloc(&m.tailHost, sizeof(uint64_t), cudaHostAllocMapped));
  *m.tailHost = 0;
  PB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m.tailDev), m.tailHost, 0));
  PB_CUDA_CHECK(cudaMalloc(&m.head, sizeof(unsigned long long)));
  PB_CUDA_CHECK(cudaMemset(m.head, 0, sizeof(unsigned long long)));
  PB_CUDA_CHECK(cudaMalloc(&m.tailCache, sizeof(unsigned long long)));
  PB_CUDA_CHECK(cudaMemset(m.tailCache, 0, sizeof(unsigned long long)));
  PB_CUDA_CHECK(cudaDeviceSynchronize());  // the memsets land before any kernel can push
}

Fifo::~Fifo() = default;

ProxyTrigger Fifo::poll(bool* ready) {
  ProxyTrigger* slot = &impl_->triggers[impl_->tail % impl_->size];
  uint64_t snd = __atomic_load_n(&slot->snd, __ATOMIC_ACQUIRE);
  *ready = (snd & kTriggerValidBit) != 0;
  if (!*ready) return ProxyTrigger{0, 0};
  // The device stored fst and the valid bit in one 16-byte write (fifo_device.hpp).
  return ProxyTrigger{__atomic_load_n(&slot->fst, __ATOMIC_ACQUIRE), snd & ~kTriggerValidBit};
}

void Fifo::pop() {
  Impl& m = *impl_;
  ProxyTrigger* slot = &m.triggers[m.tail % m.size];
  __atomic_store_n(&slot->snd, uint64_t{0}, __ATOMIC_RELEASE);  // the slot may be rewritten once the tail passes it
  ++m.tail;
  __atomic_store_n(m.tailHost, m.tail, __ATOMIC_RELEASE);
}

void Fifo::abort() { __atomic_store_n(&impl_->flags[0], 1u, __ATOMIC_RELEASE); }
uint32_t Fifo::deviceError() const { return __atomic_load_n(&impl_->flags[1], __ATOMIC_ACQUIRE); }
uint64_t Fifo::tail() const { return impl_->tail; }
uint32_t Fifo::size() const { return impl_->size; }

uint32_t Fifo::pending() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < impl_->size; ++i)
    n += (__atomic_load_n(&impl_->triggers[i].snd, __ATOMIC_ACQUIRE) & kTriggerValidBit) ? 1 : 0;
  return n;
}

FifoDeviceHandle Fifo::deviceHandle() const {
  const Impl& m = *impl_;
  return FifoDeviceHandle{m.triggersDev, m.head, m.tailDev, m.tailCache, m.flagsDev, m.flagsDev + 1, m.size};
}

}  // namespace plugboard
