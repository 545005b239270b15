// LL16 packets, shared by the collective and the point-to-point LL
// kernels: 8 payload bytes and two copies of a 32-bit flag in 16 bytes,
// stored and loaded as one 16-byte access, so a reader that sees both flags
// equal to the call's flag sees that call's payload.
#pragma once

#include <cstdint>

#include "gpu/collectives/pipe_device.cuh"

namespace plugboard::gpucoll {

/// Flag of LL call number `call` (>= 1): never 0, the value of fresh memory.
__device__ __forceinline__ uint32_t llFlag(uint64_t call) { return static_cast<uint32_t>(call % 0xffffffffull) + 1; }

/// The 8 input bytes of packet i (zero past the end), from any element-aligned buffer.
__device__ __forceinline__ uint2 loadPayload(const char* src, uint64_t i, uint64_t bytes) {
  const char* p = src + 8 * i;
  if (8 * i + 8 <= bytes && (reinterpret_cast<uintptr_t>(p) % 8) == 0) return *reinterpret_cast<const uint2*>(p);
  uint2 v = make_uint2(0, 0);
  char* out = reinterpret_cast<char*>(&v);
  for (uint64_t k = 0; k < 8 && 8 * i + k < bytes; ++k) out[k] = p[k];
  return v;
}

__device__ __forceinline__ void storePacket(char* dst, uint2 v, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(dst), "r"(v.x), "r"(flag), "r"(v.y), "r"(flag)
               : "memory");
}

/// One look at an LL16 packet: true, with its payload, when both flags equal flag.
__device__ __forceinline__ bool tryLoadPacket(const char* src, uint32_t flag, uint2& out) {
  uint32_t d1, f1, d2, f2;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(d1), "=r"(f1), "=r"(d2), "=r"(f2) : "l"(src));
  out = make_uint2(d1, d2);
  return f1 == flag && f2 == flag;
}

/// Polls an LL16 packet until both flags equal flag; false (recorded) on timeout or abort.
__device__ inline bool pollPacket(const DeviceCtx& c, const char* src, uint32_t flag, int peer, Coll coll, uint2& out) {
  WaitClock clock(c.waitTimeoutNs);
  for (int64_t spins = 0;; ++spins) {
    if (tryLoadPacket(src, flag, out)) return true;
    if (!WaitClock::checkNow(spins)) continue;
    if (*c.abortFlag) {
      recordFailure(c, peer, coll, kSemaphoreAborted);
      return false;
    }
    if (clock.expired()) {
      recordFailure(c, peer, coll, kSemaphoreWaitTimeout);
      return false;
    }
  }
}

/// Stores the valid elements of an 8-byte result packet i.
__device__ __forceinline__ void storeResult(char* dst, uint64_t i, uint64_t bytes, uint2 v) {
  char* p = dst + 8 * i;
  if (8 * i + 8 <= bytes && (reinterpret_cast<uintptr_t>(p) % 8) == 0) {
    *reinterpret_cast<uint2*>(p) = v;
    return;
  }
  const char* in = reinterpret_cast<const char*>(&v);
  for (uint64_t k = 0; k < 8 && 8 * i + k < bytes; ++k) p[k] = in[k];
}

}  // namespace plugboard::gpucoll
