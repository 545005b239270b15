#include "plugboard/gpu/fifo.hpp"

#include <atomic>

#include "gpu/cuda_check.hpp"

namespace plugboard {
namespace {

constexpr uint32_t kIdlePollsBeforeFlush = 64;

}  // namespace

struct Fifo::Impl {
  uint32_t size = 0;
  ProxyTrigger* triggers = nullptr;     // pinned, mapped
  ProxyTrigger* triggersDev = nullptr;  // its device alias
  unsigned long long* head = nullptr;   // device
  uint64_t* tailReplica = nullptr;      // device
  uint64_t* tailStaging = nullptr;      // pinned: source of the async replica copy
  uint32_t* flags = nullptr;            // pinned, mapped: [0] abort, [1] device error
  uint32_t* flagsDev = nullptr;
  cudaStream_t stream = nullptr;        // replica copies never wait on user work
  uint64_t tail = 0;
  uint64_t flushedTail = 0;
  uint32_t idlePolls = 0;  // empty polls since the last trigger

  ~Impl() {
    if (stream) cudaStreamSynchronize(stream), cudaStreamDestroy(stream);
    if (head) cudaFree(head);
    if (tailReplica) cudaFree(tailReplica);
    if (triggers) cudaFreeHost(triggers);
    if (tailStaging) cudaFreeHost(tailStaging);
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
  PB_CUDA_CHECK(cudaHostAlloc(&m.tailStaging, sizeof(uint64_t), cudaHostAllocDefault));
  *m.tailStaging = 0;
  PB_CUDA_CHECK(cudaMalloc(&m.head, sizeof(unsigned long long)));
  PB_CUDA_CHECK(cudaMemset(m.head, 0, sizeof(unsigned long long)));
  PB_CUDA_CHECK(cudaMalloc(&m.tailReplica, sizeof(uint64_t)));
  PB_CUDA_CHECK(cudaMemset(m.tailReplica, 0, sizeof(uint64_t)));
  PB_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
}

Fifo::~Fifo() = default;

ProxyTrigger Fifo::poll(bool* ready) {
  ProxyTrigger* slot = &impl_->triggers[impl_->tail % impl_->size];
  uint64_t snd = __atomic_load_n(&slot->snd, __ATOMIC_ACQUIRE);
  *ready = (snd & kTriggerValidBit) != 0;
  if (!*ready) {
    // Idle for a while: let producers waiting for room see every pop. Not at
    // once: a flush costs microseconds of this thread, and a ping-pong
    // producer's next trigger is usually on its way (sync() needs no flush).
    if (++impl_->idlePolls >= kIdlePollsBeforeFlush && impl_->flushedTail != impl_->tail) flushTail(false);
    return ProxyTrigger{0, 0};
  }
  impl_->idlePolls = 0;
  // The device fenced fst before setting the valid bit in snd.
  return ProxyTrigger{__atomic_load_n(&slot->fst, __ATOMIC_ACQUIRE), snd & ~kTriggerValidBit};
}

void Fifo::pop() {
  Impl& m = *impl_;
  ProxyTrigger* slot = &m.triggers[m.tail % m.size];
  __atomic_store_n(&slot->snd, uint64_t{0}, __ATOMIC_RELEASE);  // the slot may be rewritten once the tail passes it
  ++m.tail;
  // Producers may be waiting for room once a full queue's worth is unflushed.
  if (m.tail - m.flushedTail >= std::max<uint32_t>(1, m.size / 8)) flushTail(false);
}

void Fifo::flushTail(bool sync) {
  Impl& m = *impl_;
  // The staging word is read by the copy engine later: wait for the last
  // copy before overwriting it, which also bounds copies in flight to one.
  PB_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  *m.tailStaging = m.tail;
  PB_CUDA_CHECK(cudaMemcpyAsync(m.tailReplica, m.tailStaging, sizeof(uint64_t), cudaMemcpyHostToDevice, m.stream));
  m.flushedTail = m.tail;
  if (sync) PB_CUDA_CHECK(cudaStreamSynchronize(m.stream));
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
  return FifoDeviceHandle{m.triggersDev, m.head, m.tailReplica, m.flagsDev, m.flagsDev + 1, m.size};
}

}  // namespace plugboard
