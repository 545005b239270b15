// StagingEngine's receive thread: landed slots -> GPU copies and signals,
// applied in arrival order on one stream; credits back as copies finish.
#include <cstring>
#include <thread>

#include "communicator/signal_event.hpp"
#include "communicator/wait.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/staging_engine.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

/// A signal to a host counter, run by CUDA after the copies before it.
struct HostAdd {
  uint64_t* counter;
  uint64_t value;
};

void CUDART_CB applyHostAdd(void* p) {
  auto* add = static_cast<HostAdd*>(p);
  __atomic_fetch_add(add->counter, add->value, __ATOMIC_RELEASE);
  SignalEvent::instance().notify();
  delete add;
}

}  // namespace

void StagingEngine::receiveLoop() {
  try {
    PB_CUDA_CHECK(cudaSetDevice(device_));
    const bool notifies = (conn_.plugin->properties().flags & PB_CAP_SIGNAL_NOTIFY) != 0;
    // Idle pacing only: this thread waits for the peer indefinitely (until stop()).
    Backoff idle(std::chrono::hours(24 * 365), notifies);
    while (!stopping_.load(std::memory_order_acquire)) {
      idle.arm();
      const bool retired = retireLanded();
      const bool took = takeArrivals();
      if (retired || took) idle = Backoff(std::chrono::hours(24 * 365), notifies);
      else if (!landed_.empty()) std::this_thread::yield();  // a finished copy wakes nobody: poll, do not sleep
      else idle.pause();
    }
  } catch (const std::exception& e) {
    PB_LOG(Warn, "NET", conn_.describe() << ": staging receiver stopped: " << e.what());
    failConnection();
  }
}

bool StagingEngine::takeArrivals() {
  const uint64_t arrived = __atomic_load_n(&control()[0], __ATOMIC_ACQUIRE);
  bool any = false;
  while (taken_ < arrived && landed_.size() < slots_) {
    const uint32_t slot = static_cast<uint32_t>(taken_ % slots_);
    StagingSlotHeader h;
    std::memcpy(&h, landingSlot(slot), sizeof h);
    takenAt_[slot] = std::chrono::steady_clock::now();
    apply(h, slot);
    landed_.push_back(slot);
    ++taken_;
    any = true;
  }
  return any;
}

void StagingEngine::apply(const StagingSlotHeader& h, uint32_t slot) {
  std::shared_ptr<RegisteredMemoryImpl> region = comm_.findRegion(h.region);
  checkStagingHeader(h, taken_, chunk_, region ? std::optional<uint64_t>(region->size) : std::nullopt, [&] {
    return conn_.describe() + ": staged " + stagingOpName(h.op) + " in landing slot " + std::to_string(slot);
  });
  char* target = static_cast<char*>(region->data);
  if (h.op == kStagedWrite) {
    PB_CUDA_CHECK(cudaMemcpyAsync(target + h.offset, landingSlot(slot) + sizeof(StagingSlotHeader), h.size,
                                  cudaMemcpyDefault, receiveStream_));
  } else {
    auto* counter = reinterpret_cast<uint64_t*>(target + h.offset);
    if (region->kind == MemoryKind::Cuda) counters_->add(*region, h.offset, h.value, receiveStream_);
    else PB_CUDA_CHECK(cudaLaunchHostFunc(receiveStream_, applyHostAdd, new HostAdd{counter, h.value}));
  }
  PB_CUDA_CHECK(cudaEventRecord(landedEvents_[slot], receiveStream_));
}

bool StagingEngine::retireLanded() {
  uint64_t drained = 0;
  while (!landed_.empty()) {
    cudaError_t st = cudaEventQuery(landedEvents_[landed_.front()]);
    if (st == cudaErrorNotReady) break;
    PB_CUDA_CHECK(st);
    times_.landed.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - takenAt_[landed_.front()])
            .count(),
        std::memory_order_relaxed);
    landed_.pop_front();
    ++drained;
  }
  if (drained) {
    conn_.postSignal(peerControl_->rkey, 8, drained);
    retired_.fetch_add(drained, std::memory_order_relaxed);
  }
  return drained > 0;
}

}  // namespace plugboard
