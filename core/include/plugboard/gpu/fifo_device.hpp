/// @file fifo_device.hpp
/// Device side of the GPU -> CPU trigger queue (see fifo.hpp): many GPU
/// threads push 16-byte triggers, the proxy thread pops them.
///
/// Layout and protocol (the invariants both sides rely on):
///  - triggers: `size` slots in pinned, mapped host memory.
///  - head: a device-memory counter; push() takes position p = head++.
///  - tail: the host's count of popped triggers, in pinned, mapped host
///    memory, stored by the host on every pop. No CUDA stream work is
///    involved (a copy could queue behind the very kernel waiting for room:
///    CUDA MPS clients share hardware queues). Position p may be written
///    only once p < tail + size: the slot's previous trigger was popped.
///  - tailCache: a device-memory lower bound of tail, raised by producers
///    whenever they read tail across PCIe; a push reads PCIe only when the
///    cache says the queue may be full.
///  - A trigger is valid when bit 63 of `snd` is set. push() writes the
///    whole trigger with one 16-byte store at system scope with release
///    semantics (one PCIe write of an aligned 16-byte slot, so `fst` and the
///    valid bit land together; the release orders every write the pushing
///    thread made or observed before it, as a system fence would); the host
///    reads `snd` first and clears it when it pops.
///  - sync(pos) polls the trigger's own slot (cleared on pop: one PCIe read,
///    no wait for a replica flush). The slot can hold a newer valid trigger
///    only after pos + size was pushed, which needed tailReplica > pos, so
///    "slot clear or tail > pos" means popped.
///  - Every wait is bounded in time (device_wait.hpp) and by the host's abort flag; on
///    either, push() returns kFifoPushFailed and records why in *error.
#pragma once

#include <cstdint>

#include "plugboard/gpu/device_wait.hpp"

namespace plugboard {

/// One request from a GPU thread to the proxy. Bit 63 of snd is the valid
/// flag, so users have 127 bits; PortChannel defines their meaning.
struct alignas(16) ProxyTrigger {
  uint64_t fst;
  uint64_t snd;
};
static_assert(sizeof(ProxyTrigger) == 16, "a trigger is 16 bytes");

/// Bit of ProxyTrigger::snd that marks a slot as holding a trigger.
constexpr uint64_t kTriggerValidBit = 1ull << 63;
/// push() result when it gave up (timeout or abort).
constexpr uint64_t kFifoPushFailed = ~0ull;

/// Codes a device-side wait leaves in FifoDeviceHandle::error.
enum FifoDeviceError : uint32_t { kFifoOk = 0, kFifoFullTimeout = 1, kFifoAborted = 2, kFifoSyncTimeout = 3 };

/// Plain struct handed to kernels by Fifo::deviceHandle(); copy it by value.
struct FifoDeviceHandle {
  ProxyTrigger* triggers;          ///< size slots, host-pinned and mapped.
  unsigned long long* head;        ///< Device memory: next position to take.
  volatile uint64_t* tail;         ///< Mapped host memory: positions < it are popped.
  unsigned long long* tailCache;   ///< Device memory: a lower bound of *tail.
  volatile uint32_t* abortFlag;    ///< Mapped host memory: non-zero makes waits give up.
  uint32_t* error;                 ///< Mapped host memory: first FifoDeviceError seen.
  uint32_t size;                   ///< Number of slots.

#if defined(__CUDACC__)
  /// Pushes t (bit 63 of t.snd must be clear); returns its position, or
  /// kFifoPushFailed after timeoutNs of a full queue or on abort.
  PB_DEVICE_INLINE uint64_t push(ProxyTrigger t, int64_t timeoutNs = kDefaultWaitTimeoutNs) const {
    const uint64_t pos = atomicAdd(head, 1ull);
    if (!waitBelow(pos, size, timeoutNs, kFifoFullTimeout)) return kFifoPushFailed;
    ProxyTrigger* slot = &triggers[pos % size];
    asm volatile("st.release.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(slot), "l"(t.fst), "l"(t.snd | kTriggerValidBit)
                 : "memory");
    return pos;
  }

  /// Waits until the trigger at pos was popped. False after timeoutNs or on abort.
  PB_DEVICE_INLINE bool sync(uint64_t pos, int64_t timeoutNs = kDefaultWaitTimeoutNs) const {
    const volatile uint64_t* snd = &triggers[pos % size].snd;
    WaitClock clock(timeoutNs);
    for (int64_t spins = 0; (*snd & kTriggerValidBit) && pos >= *tail; ++spins) {
      if (!WaitClock::checkNow(spins)) continue;
      if (*abortFlag) return fail(kFifoAborted);
      if (clock.expired()) return fail(kFifoSyncTimeout);
    }
    return true;
  }

 private:
  /// Waits for pos < tail + slack: the device cache first, then the host's tail.
  PB_DEVICE_INLINE bool waitBelow(uint64_t pos, uint64_t slack, int64_t timeoutNs, uint32_t why) const {
    if (pos < *reinterpret_cast<volatile unsigned long long*>(tailCache) + slack) return true;
    WaitClock clock(timeoutNs);
    for (int64_t spins = 0;; ++spins) {
      const uint64_t t = *tail;
      if (pos < t + slack) {
        atomicMax(tailCache, static_cast<unsigned long long>(t));
        return true;
      }
      // The abort flag lives across PCIe: look at it only now and then.
      if (!WaitClock::checkNow(spins)) continue;
      if (*abortFlag) return fail(kFifoAborted);
      if (clock.expired()) return fail(why);
    }
  }
  PB_DEVICE_INLINE bool fail(uint32_t why) const {
    atomicCAS(error, 0u, why);
    return false;
  }
#endif
};

}  // namespace plugboard
