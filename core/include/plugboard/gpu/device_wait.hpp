/// @file device_wait.hpp
/// Time bound of every device-side wait (semaphores, Fifo, LL packets,
/// the collectives' pipes): a wait gives up after a number of nanoseconds
/// of the GPU's global timer, not after a number of polls, so the bound is
/// the same whatever the GPU's scheduling (time-sliced processes, MPS
/// clients, a peer over PCIe or NVLink).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PB_DEVICE_INLINE __forceinline__ __device__
#define PB_HOST_DEVICE_INLINE __forceinline__ __host__ __device__
#else
#define PB_DEVICE_INLINE inline
#define PB_HOST_DEVICE_INLINE inline
#endif

namespace plugboard {

/// Default bound of a device-side wait: 30 s (the GPU collectives take
/// theirs from the gpu_wait_timeout setting).
constexpr int64_t kDefaultWaitTimeoutNs = 30'000'000'000ll;

/// Polls between two looks at the clock and at an abort flag (both cost a
/// memory or special-register read the poll itself does not need).
constexpr int64_t kWaitCheckEvery = 1024;

#if defined(__CUDACC__)
/// Nanoseconds of the GPU's global timer (%globaltimer).
PB_DEVICE_INLINE uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// The clock of one wait. Its start is taken at the first check, so a wait
/// that succeeds within kWaitCheckEvery polls never reads the timer; the
/// bound is timeoutNs from then (a few microseconds late at most).
struct WaitClock {
  int64_t timeoutNs;
  uint64_t start = 0;

  PB_DEVICE_INLINE explicit WaitClock(int64_t ns) : timeoutNs(ns) {}
  /// True on the polls where a wait should look at its abort flag and call expired().
  PB_DEVICE_INLINE static bool checkNow(int64_t spins) { return (spins % kWaitCheckEvery) == kWaitCheckEvery - 1; }
  /// True once timeoutNs have passed since the first call.
  PB_DEVICE_INLINE bool expired() {
    const uint64_t now = globalTimerNs();
    if (start == 0) start = now;
    return static_cast<int64_t>(now - start) > timeoutNs;
  }
};
#endif

}  // namespace plugboard
