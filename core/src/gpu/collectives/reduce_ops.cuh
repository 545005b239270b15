// Element-wise reduction ops for the collective kernels: every DataType x
// sum, prod, min, max (avg is sum, then Acc<T>::divide once at the output).
// Values are combined in an accumulator type and stored back once in the
// element type:
//  - float for the 16- and 8-bit floats (a chain of ops rounds once; fp8
//    stores saturate to the largest finite value, as CUDA's SATFINITE and
//    the host collectives do), float and double for themselves;
//  - uint32 for the 8- and 32-bit integers and uint64 for the 64-bit ones,
//    sign-extended for the signed types, so sums and products wrap as two's
//    complement without signed overflow; min and max compare as the
//    element's signedness.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpu/collectives/device_ctx.hpp"

namespace plugboard::gpucoll {

/// Accumulator of a float element type F (Wide: float or double).
template <typename F, typename Wide>
struct FloatAcc {
  using type = Wide;
  static __device__ __forceinline__ bool less(Wide a, Wide b) { return a < b; }
  static __device__ __forceinline__ Wide divide(Wide a, uint32_t n) { return a / static_cast<Wide>(n); }
};

/// Accumulator of an integer element type I: Wide unsigned (wrapping),
/// compared and divided as I's signedness.
template <typename I, typename Wide>
struct IntAcc {
  using type = Wide;
  using Signed = typename std::conditional<sizeof(Wide) == 8, int64_t, int32_t>::type;
  static constexpr bool kSigned = static_cast<I>(-1) < static_cast<I>(0);
  static __device__ __forceinline__ Wide in(I v) { return static_cast<Wide>(static_cast<Signed>(v)); }
  static __device__ __forceinline__ I out(Wide v) { return static_cast<I>(v); }
  static __device__ __forceinline__ bool less(Wide a, Wide b) {
    if constexpr (kSigned) return static_cast<Signed>(a) < static_cast<Signed>(b);
    else return a < b;
  }
  /// Truncates toward zero, as C++ and the host collectives do.
  static __device__ __forceinline__ Wide divide(Wide a, uint32_t n) {
    if constexpr (kSigned) return static_cast<Wide>(static_cast<Signed>(a) / static_cast<Signed>(n));
    else return a / n;
  }
};

/// Accumulator of an element type, with conversions both ways.
template <typename T>
struct Acc;
template <>
struct Acc<float> : FloatAcc<float, float> {
  static __device__ __forceinline__ float in(float v) { return v; }
  static __device__ __forceinline__ float out(float v) { return v; }
};
template <>
struct Acc<double> : FloatAcc<double, double> {
  static __device__ __forceinline__ double in(double v) { return v; }
  static __device__ __forceinline__ double out(double v) { return v; }
};
template <>
struct Acc<__half> : FloatAcc<__half, float> {
  static __device__ __forceinline__ float in(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half out(float v) { return __float2half_rn(v); }
};
template <>
struct Acc<__nv_bfloat16> : FloatAcc<__nv_bfloat16, float> {
  static __device__ __forceinline__ float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};
/// An OCP 8-bit float: in through half (exact), out rounded to nearest even, saturating.
template <typename F8, __nv_fp8_interpretation_t kKind>
struct Fp8Acc : FloatAcc<F8, float> {
  static __device__ __forceinline__ float in(F8 v) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(v.__x, kKind))); }
  static __device__ __forceinline__ F8 out(float v) {
    F8 r;
    r.__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, kKind);
    return r;
  }
};
template <>
struct Acc<__nv_fp8_e4m3> : Fp8Acc<__nv_fp8_e4m3, __NV_E4M3> {};
template <>
struct Acc<__nv_fp8_e5m2> : Fp8Acc<__nv_fp8_e5m2, __NV_E5M2> {};
template <>
struct Acc<int8_t> : IntAcc<int8_t, uint32_t> {};
template <>
struct Acc<uint8_t> : IntAcc<uint8_t, uint32_t> {};
template <>
struct Acc<int32_t> : IntAcc<int32_t, uint32_t> {};
template <>
struct Acc<uint32_t> : IntAcc<uint32_t, uint32_t> {};
template <>
struct Acc<int64_t> : IntAcc<int64_t, uint64_t> {};
template <>
struct Acc<uint64_t> : IntAcc<uint64_t, uint64_t> {};

/// x times s as a PreMulSum scales an input, in T itself: integers wrap in
/// their own width, floats multiply in their accumulator and round once (so
/// a fused scale gives the bits a separate scaling pass would).
template <typename T>
__device__ __forceinline__ T preMul(T x, T s) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(s)));
  } else {
    return Acc<T>::out(Acc<T>::in(x) * Acc<T>::in(s));
  }
}

/// Element e of source k, scaled when k is the PreMulSum's scaled source
/// (kScaled: the caller passes one).
template <typename T, bool kScaled>
__device__ __forceinline__ T sourceElem(T e, int k, int scaled, T scale) {
  if constexpr (kScaled) return k == scaled ? preMul(e, scale) : e;
  else return e;
}

/// Sum and product act on the accumulator; min and max compare as the
/// element type (Acc<T>::less).
struct OpSum {
  template <typename T, typename A>
  static __device__ __forceinline__ A apply(A a, A b) { return a + b; }
};
struct OpProd {
  template <typename T, typename A>
  static __device__ __forceinline__ A apply(A a, A b) { return a * b; }
};
struct OpMin {
  template <typename T, typename A>
  static __device__ __forceinline__ A apply(A a, A b) { return Acc<T>::less(b, a) ? b : a; }
};
struct OpMax {
  template <typename T, typename A>
  static __device__ __forceinline__ A apply(A a, A b) { return Acc<T>::less(a, b) ? b : a; }
};

/// The PreMulSum scalar of a call (false: none; only Sum kernels have one).
template <typename T, typename Op>
__device__ __forceinline__ bool preMulScalar(const PreMulArgs& p, T* scale) {
  if constexpr (!std::is_same_v<Op, OpSum>) {
    return false;
  } else {
    if (!p.on) return false;
    if (p.device) {
      *scale = *static_cast<const T*>(p.device);
    } else {
      uint64_t bits = p.hostBits;
      memcpy(scale, &bits, sizeof(T));
    }
    return true;
  }
}

/// The stored value of an accumulated result: divided by `divisor` first
/// when it is not 1 (avg).
template <typename T>
__device__ __forceinline__ T finish(typename Acc<T>::type acc, uint32_t divisor) {
  return Acc<T>::out(divisor == 1 ? acc : Acc<T>::divide(acc, divisor));
}

/// Loads element i of a buffer written by another GPU or another kernel
/// (L2, not L1: a scratch slot is rewritten through the peer mapping).
template <typename T>
__device__ __forceinline__ T loadElem(const char* base, uint64_t i) {
  if constexpr (sizeof(T) == 8) {
    unsigned long long v = __ldcg(reinterpret_cast<const unsigned long long*>(base) + i);
    return *reinterpret_cast<T*>(&v);
  } else if constexpr (sizeof(T) == 4) {
    unsigned v = __ldcg(reinterpret_cast<const unsigned*>(base) + i);
    return *reinterpret_cast<T*>(&v);
  } else if constexpr (sizeof(T) == 2) {
    unsigned short v = __ldcg(reinterpret_cast<const unsigned short*>(base) + i);
    return *reinterpret_cast<T*>(&v);
  } else {
    unsigned char v = __ldcg(reinterpret_cast<const unsigned char*>(base) + i);
    return *reinterpret_cast<T*>(&v);
  }
}

/// Reduces vectors v + k * step, k < kBatch, over nsrc sources into ndst
/// outputs: the batch's loads of one source are in flight together.
template <typename T, typename Op, uint32_t kBatch, bool kScaled>
__device__ __forceinline__ void reduceVectors(char* const* dst, int ndst, const char* const* src, int nsrc, uint64_t v,
                                              uint64_t step, uint32_t divisor, int scaled, T scale) {
  using A = typename Acc<T>::type;
  constexpr uint32_t kPer = 16 / sizeof(T);
  A acc[kBatch][kPer];
  int4 raw[kBatch];
#pragma unroll
  for (uint32_t b = 0; b < kBatch; ++b) raw[b] = __ldcg(reinterpret_cast<const int4*>(src[0]) + v + b * step);
#pragma unroll
  for (uint32_t b = 0; b < kBatch; ++b) {
    const T* e = reinterpret_cast<const T*>(&raw[b]);
#pragma unroll
    for (uint32_t j = 0; j < kPer; ++j) acc[b][j] = Acc<T>::in(sourceElem<T, kScaled>(e[j], 0, scaled, scale));
  }
  for (int k = 1; k < nsrc; ++k) {
#pragma unroll
    for (uint32_t b = 0; b < kBatch; ++b) raw[b] = __ldcg(reinterpret_cast<const int4*>(src[k]) + v + b * step);
#pragma unroll
    for (uint32_t b = 0; b < kBatch; ++b) {
      const T* e = reinterpret_cast<const T*>(&raw[b]);
#pragma unroll
      for (uint32_t j = 0; j < kPer; ++j)
        acc[b][j] = Op::template apply<T, A>(acc[b][j], Acc<T>::in(sourceElem<T, kScaled>(e[j], k, scaled, scale)));
    }
  }
#pragma unroll
  for (uint32_t b = 0; b < kBatch; ++b) {
    T* o = reinterpret_cast<T*>(&raw[b]);
#pragma unroll
    for (uint32_t j = 0; j < kPer; ++j) o[j] = finish<T>(acc[b][j], divisor);
    for (int k = 0; k < ndst; ++k) reinterpret_cast<int4*>(dst[k])[v + b * step] = raw[b];
  }
}

/// Element-wise reduction over nsrc sources in source order into ndst
/// outputs, elems elements, split over threads [0, nthreads), each result
/// divided by divisor (1 except for avg). 16-byte
/// vectors when every pointer is 16-byte aligned (in batches of kBatch per
/// thread, then single vectors), then a scalar remainder. kScaled: source
/// `scaled` is multiplied by `scale` as it is read (preMul; PreMulSum).
template <typename T, typename Op, bool kScaled = false>
__device__ void reduceElems(char* const* dst, int ndst, const char* const* src, int nsrc, uint64_t elems,
                            uint32_t tid, uint32_t nthreads, uint32_t divisor, int scaled = -1, T scale = T()) {
  using A = typename Acc<T>::type;
  // 8-bit types accumulate 16 words per vector: a batch of 4 would not fit kMaxBlockThreads' registers.
  constexpr uint32_t kPer = 16 / sizeof(T), kBatch = sizeof(T) == 1 ? 2 : 4;
  bool aligned = true;
  for (int k = 0; k < nsrc; ++k) aligned &= (reinterpret_cast<uintptr_t>(src[k]) % 16) == 0;
  for (int k = 0; k < ndst; ++k) aligned &= (reinterpret_cast<uintptr_t>(dst[k]) % 16) == 0;
  uint64_t done = 0;
  if (aligned) {
    const uint64_t vecs = elems / kPer;
    uint64_t v = tid;
    for (; v + (kBatch - 1) * nthreads < vecs; v += kBatch * nthreads)
      reduceVectors<T, Op, kBatch, kScaled>(dst, ndst, src, nsrc, v, nthreads, divisor, scaled, scale);
    for (; v < vecs; v += nthreads)
      reduceVectors<T, Op, 1, kScaled>(dst, ndst, src, nsrc, v, nthreads, divisor, scaled, scale);
    done = vecs * kPer;
  }
  for (uint64_t i = done + tid; i < elems; i += nthreads) {
    A acc = Acc<T>::in(sourceElem<T, kScaled>(loadElem<T>(src[0], i), 0, scaled, scale));
    for (int k = 1; k < nsrc; ++k)
      acc = Op::template apply<T, A>(acc, Acc<T>::in(sourceElem<T, kScaled>(loadElem<T>(src[k], i), k, scaled, scale)));
    const T out = finish<T>(acc, divisor);
    for (int k = 0; k < ndst; ++k) reinterpret_cast<T*>(dst[k])[i] = out;
  }
}

}  // namespace plugboard::gpucoll
