/// @file semaphore_device.hpp
/// Device side of a device-to-device semaphore between two GPUs (or two
/// processes on one GPU) whose memory is mapped into each other (CUDA IPC).
///
/// Invariants: each side owns `inbound` (its peer adds to it through the
/// mapping) and `expected` (the count its waits have consumed). signal()
/// is a release at system scope: every earlier write of the calling thread,
/// and (the release is cumulative) every write other threads of its block
/// made before a block barrier that precedes the signal, is visible before
/// the add lands. wait() acquires: once it returns, the waiting thread (and
/// every thread of its block after a following barrier) sees that data.
/// One waiting thread at a time per semaphore; any number of signalling
/// threads.
#pragma once

#include <cstdint>

#include "plugboard/gpu/fifo_device.hpp"

#if defined(__CUDACC__)
#include <cuda/atomic>
#endif

namespace plugboard {

/// Codes a semaphore wait leaves in its error word.
enum SemaphoreDeviceError : uint32_t { kSemaphoreOk = 0, kSemaphoreWaitTimeout = 1, kSemaphoreAborted = 2 };

/// Plain struct for kernels (Device2DeviceSemaphore::deviceHandle()).
struct Device2DeviceSemaphoreDeviceHandle {
  uint64_t* inbound;            ///< This side's counter, written by the peer.
  uint64_t* remoteInbound;      ///< The peer's counter, mapped here.
  uint64_t* expected;           ///< Signals this side's waits consumed so far.
  volatile uint32_t* abortFlag; ///< Mapped host memory: non-zero ends waits.
  uint32_t* error;              ///< Mapped host memory: first SemaphoreDeviceError.

#if defined(__CUDACC__)
  /// Adds 1 to the peer's inbound counter after this thread's earlier writes.
  PB_DEVICE_INLINE void signal() const {
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> out(*remoteInbound);
    out.fetch_add(1, cuda::memory_order_release);
  }

  /// Waits for the next signal. False (and *error set) after timeoutNs or on abort.
  PB_DEVICE_INLINE bool wait(int64_t timeoutNs = kDefaultWaitTimeoutNs) const {
    const uint64_t target = ++*expected;
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> in(*inbound);
    WaitClock clock(timeoutNs);
    // Relaxed polls, one acquire fence once the count is there.
    for (int64_t spins = 0; in.load(cuda::memory_order_relaxed) < target; ++spins) {
      if (!WaitClock::checkNow(spins)) continue;
      if (*abortFlag) return fail(kSemaphoreAborted);
      if (clock.expired()) return fail(kSemaphoreWaitTimeout);
    }
    cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_system);
    return true;
  }

  /// True when a signal is pending (does not consume it).
  PB_DEVICE_INLINE bool poll() const {
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> in(*inbound);
    return in.load(cuda::memory_order_acquire) > *expected;
  }

 private:
  PB_DEVICE_INLINE bool fail(uint32_t why) const {
    atomicCAS(error, 0u, why);
    return false;
  }
#endif
};

}  // namespace plugboard
