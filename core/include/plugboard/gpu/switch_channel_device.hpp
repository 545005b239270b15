/// @file switch_channel_device.hpp
/// Device side of a SwitchChannel: one buffer per rank, reached as a group.
/// `reduce` returns 16 bytes reduced over every rank's buffer at an offset,
/// `broadcast` stores 16 bytes at an offset of every rank's buffer, and
/// `arrive` / `wait` make a barrier of the group out of counters that
/// follow the data.
///
/// Two backends run the same calls:
///  - multicast (the nvls transport, NVLink SHARP): `multimem.ld_reduce`,
///    `multimem.st` and `multimem.red` on the multicast mapping, so the
///    switch reduces and replicates;
///  - peers (every rank's buffer mapped here through cudaipc): loads from
///    and stores to each rank's buffer in turn, reducing in rank order.
/// Types and ops are those the multicast instructions have on sm_90:
/// Float32 sum, Float16 and BFloat16 sum, min and max (Hopper's
/// `multimem.ld_reduce` has no f32 min/max).
#pragma once

#include <cstdint>

#include "plugboard/gpu/device_wait.hpp"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace plugboard {

/// Element types of SwitchChannel reductions.
enum class SwitchType : uint32_t { Float32 = 0, Float16 = 1, BFloat16 = 2 };
/// Reduction ops of SwitchChannel reductions.
enum class SwitchOp : uint32_t { Sum = 0, Min = 1, Max = 2 };

/// Barrier counters a SwitchChannel buffer holds after its data: one per
/// thread block of a kernel that synchronises per block (slot = blockIdx.x).
inline constexpr uint32_t kSwitchBarrierSlots = 128;

/// Plain struct for kernels (SwitchChannel::deviceHandle()).
///
/// Invariants: every rank's buffer is laid out alike, [0, dataBytes) data,
/// then kSwitchBarrierSlots uint64 counters, zero at creation. Counters only
/// grow: barrier k of a slot completes when this rank's counter reaches
/// k * nranks; `expected` (device memory of this rank only) counts what
/// this rank's waits have consumed. One thread per slot arrives and waits.
struct SwitchChannelDeviceHandle {
  char* multicast = nullptr;      ///< Multicast mapping (null: the peers backend).
  char* local = nullptr;          ///< This rank's buffer.
  char* const* peers = nullptr;   ///< Device array [nranks]: every rank's buffer mapped here (peers backend).
  uint64_t dataBytes = 0;         ///< Data bytes per rank (a multiple of 16); counters follow.
  uint64_t* expected = nullptr;   ///< Device [kSwitchBarrierSlots]: counts consumed by this rank's waits.
  int rank = 0;                   ///< This rank.
  int nranks = 0;                 ///< Ranks of the group.

#if defined(__CUDACC__)
  /// 16 bytes at offset (16-aligned, < dataBytes) reduced over every rank's
  /// buffer. Values written there before the last barrier are seen.
  template <SwitchType T, SwitchOp Op>
  PB_DEVICE_INLINE uint4 reduce(uint64_t offset) const {
    if (multicast) return multimemReduce<T, Op>(multicast + offset);
    return reducePeers<T, Op>(offset);
  }

  /// Stores v at offset (16-aligned, < dataBytes) of every rank's buffer.
  PB_DEVICE_INLINE void broadcast(uint64_t offset, uint4 v) const {
    if (multicast) {
      asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(multicast + offset), "r"(v.x),
                   "r"(v.y), "r"(v.z), "r"(v.w)
                   : "memory");
      return;
    }
    for (int p = 0; p < nranks; ++p) *reinterpret_cast<uint4*>(peers[p] + offset) = v;
  }

  /// Adds 1 to counter `slot` of every rank, releasing at system scope what
  /// this thread (and, after a block barrier, its block) wrote before.
  PB_DEVICE_INLINE void arrive(uint32_t slot) const {
    const uint64_t at = dataBytes + 8ull * slot;
    if (multicast) {
      // Data went in through both mappings (unicast stores, multicast
      // stores and reductions): order the aliases before the release.
      asm volatile("fence.proxy.alias;" ::: "memory");
      asm volatile("multimem.red.release.sys.global.add.u64 [%0], %1;" ::"l"(multicast + at), "l"(1ull) : "memory");
      return;
    }
    __threadfence_system();
    for (int p = 0; p < nranks; ++p)
      asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(peers[p] + at), "l"(1ull) : "memory");
  }

  /// Waits until every rank arrived at counter `slot` once more than this
  /// rank's earlier waits consumed. False when timeoutNs passed first or
  /// *abortFlag became non-zero (then the barrier is broken for good).
  PB_DEVICE_INLINE bool wait(uint32_t slot, int64_t timeoutNs, const volatile uint32_t* abortFlag) const {
    const uint64_t target = expected[slot] + static_cast<uint64_t>(nranks);
    const uint64_t* counter = reinterpret_cast<const uint64_t*>(local + dataBytes + 8ull * slot);
    WaitClock clock(timeoutNs);
    for (int64_t spins = 0;; ++spins) {
      uint64_t seen;
      asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(seen) : "l"(counter) : "memory");
      if (seen >= target) break;
      if (WaitClock::checkNow(spins) && ((abortFlag && *abortFlag) || clock.expired())) return false;
    }
    if (multicast) asm volatile("fence.proxy.alias;" ::: "memory");
    expected[slot] = target;
    return true;
  }

 private:
  PB_DEVICE_INLINE static uint4 load16(const char* p) { return *reinterpret_cast<const uint4*>(p); }

  template <SwitchType T, SwitchOp Op>
  PB_DEVICE_INLINE static uint4 multimemReduce(const char* at) {
    uint4 v;
#define PB_MULTIMEM_LD_REDUCE(SPEC)                                                               \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." SPEC " {%0,%1,%2,%3}, [%4];"             \
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)                                       \
               : "l"(at)                                                                          \
               : "memory")
    if constexpr (T == SwitchType::Float32) {
      static_assert(Op == SwitchOp::Sum, "multimem.ld_reduce has no f32 min/max");
      PB_MULTIMEM_LD_REDUCE("add.v4.f32");
    } else if constexpr (T == SwitchType::Float16) {
      if constexpr (Op == SwitchOp::Sum) PB_MULTIMEM_LD_REDUCE("add.acc::f32.v4.f16x2");
      else if constexpr (Op == SwitchOp::Min) PB_MULTIMEM_LD_REDUCE("min.v4.f16x2");
      else PB_MULTIMEM_LD_REDUCE("max.v4.f16x2");
    } else {
      if constexpr (Op == SwitchOp::Sum) PB_MULTIMEM_LD_REDUCE("add.acc::f32.v4.bf16x2");
      else if constexpr (Op == SwitchOp::Min) PB_MULTIMEM_LD_REDUCE("min.v4.bf16x2");
      else PB_MULTIMEM_LD_REDUCE("max.v4.bf16x2");
    }
#undef PB_MULTIMEM_LD_REDUCE
    return v;
  }

  template <SwitchOp Op>
  PB_DEVICE_INLINE static float op(float a, float b) {
    if constexpr (Op == SwitchOp::Sum) return a + b;
    else if constexpr (Op == SwitchOp::Min) return fminf(a, b);
    else return fmaxf(a, b);
  }

  /// The 16 bytes at p as floats: 4 of them (Float32) or 8 (16-bit types).
  template <SwitchType T>
  PB_DEVICE_INLINE static void toFloats(uint4 v, float* f) {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (T == SwitchType::Float32) {
        f[i] = __uint_as_float(w[i]);
      } else {
        const float2 g = T == SwitchType::Float16 ? __half22float2(*reinterpret_cast<const __half2*>(&w[i]))
                                                  : __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
        f[2 * i] = g.x;
        f[2 * i + 1] = g.y;
      }
    }
  }

  /// Floats back to 16 bytes of T, rounding once.
  template <SwitchType T>
  PB_DEVICE_INLINE static uint4 fromFloats(const float* f) {
    uint4 v;
    uint32_t* w = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (T == SwitchType::Float32) {
        w[i] = __float_as_uint(f[i]);
      } else if constexpr (T == SwitchType::Float16) {
        const __half2 h = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
        w[i] = *reinterpret_cast<const uint32_t*>(&h);
      } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
        w[i] = *reinterpret_cast<const uint32_t*>(&h);
      }
    }
    return v;
  }

  /// The peers backend's reduce: every rank's 16 bytes combined in rank
  /// order in float, rounded to T once.
  template <SwitchType T, SwitchOp Op>
  PB_DEVICE_INLINE uint4 reducePeers(uint64_t offset) const {
    constexpr int kLanes = T == SwitchType::Float32 ? 4 : 8;
    float acc[kLanes], next[kLanes];
    toFloats<T>(load16(peers[0] + offset), acc);
    for (int p = 1; p < nranks; ++p) {
      toFloats<T>(load16(peers[p] + offset), next);
#pragma unroll
      for (int i = 0; i < kLanes; ++i) acc[i] = op<Op>(acc[i], next[i]);
    }
    return fromFloats<T>(acc);
  }
#endif
};

}  // namespace plugboard
