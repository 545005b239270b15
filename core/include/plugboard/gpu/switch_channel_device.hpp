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
/// `multimem.ld_reduce` has no f32 min/max). Widths: 4, 8 or 16 bytes per
/// call (SwitchVec<1>, <2>, <4>: one, two or four 32-bit words, each a
/// float or a pair of 16-bit values).
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

/// 4 x Words bytes moved by one reduce or broadcast (Words 1, 2 or 4).
template <int Words>
struct alignas(4 * Words) SwitchVec {
  static_assert(Words == 1 || Words == 2 || Words == 4, "SwitchVec holds 1, 2 or 4 words");
  uint32_t w[Words];
};

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
  /// 4 x Words bytes at offset (aligned to them, < dataBytes) reduced over
  /// every rank's buffer. Values written there before the last barrier are seen.
  template <SwitchType T, SwitchOp Op, int Words = 4>
  PB_DEVICE_INLINE SwitchVec<Words> reduce(uint64_t offset) const {
    if (multicast) return multimemReduce<T, Op, Words>(multicast + offset);
    return reducePeers<T, Op, Words>(offset);
  }

  /// Stores v at offset (aligned to its size, < dataBytes) of every rank's buffer.
  template <int Words>
  PB_DEVICE_INLINE void broadcast(uint64_t offset, const SwitchVec<Words>& v) const {
    if (multicast) {
      char* at = multicast + offset;
      if constexpr (Words == 4)
        asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(at), "r"(v.w[0]), "r"(v.w[1]),
                     "r"(v.w[2]), "r"(v.w[3])
                     : "memory");
      else if constexpr (Words == 2)
        asm volatile("multimem.st.relaxed.sys.global.v2.f32 [%0], {%1,%2};" ::"l"(at), "r"(v.w[0]), "r"(v.w[1])
                     : "memory");
      else
        asm volatile("multimem.st.relaxed.sys.global.f32 [%0], %1;" ::"l"(at), "r"(v.w[0]) : "memory");
      return;
    }
    for (int p = 0; p < nranks; ++p) *reinterpret_cast<SwitchVec<Words>*>(peers[p] + offset) = v;
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

  /// 4 x Words bytes at p (aligned to them) through L2: bytes another
  /// GPU or an earlier operation stored (L1 does not see peers' stores).
  template <int Words>
  PB_DEVICE_INLINE static SwitchVec<Words> loadCg(const char* p) {
    SwitchVec<Words> v;
    if constexpr (Words == 4) {
      const uint4 x = __ldcg(reinterpret_cast<const uint4*>(p));
      v.w[0] = x.x, v.w[1] = x.y, v.w[2] = x.z, v.w[3] = x.w;
    } else if constexpr (Words == 2) {
      const uint2 x = __ldcg(reinterpret_cast<const uint2*>(p));
      v.w[0] = x.x, v.w[1] = x.y;
    } else {
      v.w[0] = __ldcg(reinterpret_cast<const unsigned int*>(p));
    }
    return v;
  }

 private:
  template <SwitchType T, SwitchOp Op, int Words>
  PB_DEVICE_INLINE static SwitchVec<Words> multimemReduce(const char* at) {
    static_assert(T != SwitchType::Float32 || Op == SwitchOp::Sum, "multimem.ld_reduce has no f32 min/max");
    SwitchVec<Words> v;
    // EMIT(spec) with the instruction's op and type for (T, Op) and width W:
    // f32 add; f16x2 / bf16x2 add (accumulating in f32), min, max.
#define PB_MM_CASES(EMIT, W)                                   \
  if constexpr (T == SwitchType::Float32) {                    \
    EMIT("add" W "f32");                                       \
  } else if constexpr (T == SwitchType::Float16) {             \
    if constexpr (Op == SwitchOp::Sum) EMIT("add.acc::f32" W "f16x2"); \
    else if constexpr (Op == SwitchOp::Min) EMIT("min" W "f16x2");     \
    else EMIT("max" W "f16x2");                                \
  } else {                                                     \
    if constexpr (Op == SwitchOp::Sum) EMIT("add.acc::f32" W "bf16x2"); \
    else if constexpr (Op == SwitchOp::Min) EMIT("min" W "bf16x2");     \
    else EMIT("max" W "bf16x2");                               \
  }
#define PB_MM_LD4(SPEC)                                                                                 \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." SPEC " {%0,%1,%2,%3}, [%4];"                   \
               : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])                                 \
               : "l"(at)                                                                                \
               : "memory")
#define PB_MM_LD2(SPEC) \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." SPEC " {%0,%1}, [%2];" : "=r"(v.w[0]), "=r"(v.w[1]) : "l"(at) : "memory")
#define PB_MM_LD1(SPEC) \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." SPEC " %0, [%1];" : "=r"(v.w[0]) : "l"(at) : "memory")
    if constexpr (Words == 4) {
      PB_MM_CASES(PB_MM_LD4, ".v4.")
    } else if constexpr (Words == 2) {
      PB_MM_CASES(PB_MM_LD2, ".v2.")
    } else {
      PB_MM_CASES(PB_MM_LD1, ".")
    }
#undef PB_MM_LD1
#undef PB_MM_LD2
#undef PB_MM_LD4
#undef PB_MM_CASES
    return v;
  }

  template <SwitchOp Op>
  PB_DEVICE_INLINE static float op(float a, float b) {
    if constexpr (Op == SwitchOp::Sum) return a + b;
    else if constexpr (Op == SwitchOp::Min) return fminf(a, b);
    else return fmaxf(a, b);
  }

  /// A vector's words as floats: one per word (Float32) or two (16-bit types).
  template <SwitchType T, int Words>
  PB_DEVICE_INLINE static void toFloats(const SwitchVec<Words>& v, float* f) {
#pragma unroll
    for (int i = 0; i < Words; ++i) {
      if constexpr (T == SwitchType::Float32) {
        f[i] = __uint_as_float(v.w[i]);
      } else {
        const float2 g = T == SwitchType::Float16 ? __half22float2(*reinterpret_cast<const __half2*>(&v.w[i]))
                                                  : __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.w[i]));
        f[2 * i] = g.x;
        f[2 * i + 1] = g.y;
      }
    }
  }

  /// Floats back to a vector of T, rounding once.
  template <SwitchType T, int Words>
  PB_DEVICE_INLINE static SwitchVec<Words> fromFloats(const float* f) {
    SwitchVec<Words> v;
#pragma unroll
    for (int i = 0; i < Words; ++i) {
      if constexpr (T == SwitchType::Float32) {
        v.w[i] = __float_as_uint(f[i]);
      } else if constexpr (T == SwitchType::Float16) {
        const __half2 h = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
        v.w[i] = *reinterpret_cast<const uint32_t*>(&h);
      } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
        v.w[i] = *reinterpret_cast<const uint32_t*>(&h);
      }
    }
    return v;
  }

  /// The peers backend's reduce: every rank's values combined in rank
  /// order in float, rounded to T once.
  template <SwitchType T, SwitchOp Op, int Words>
  PB_DEVICE_INLINE SwitchVec<Words> reducePeers(uint64_t offset) const {
    constexpr int kLanes = T == SwitchType::Float32 ? Words : 2 * Words;
    float acc[kLanes], next[kLanes];
    toFloats<T>(loadCg<Words>(peers[0] + offset), acc);
    for (int p = 1; p < nranks; ++p) {
      toFloats<T>(loadCg<Words>(peers[p] + offset), next);
#pragma unroll
      for (int i = 0; i < kLanes; ++i) acc[i] = op<Op>(acc[i], next[i]);
    }
    return fromFloats<T, Words>(acc);
  }
#endif
};

}  // namespace plugboard
