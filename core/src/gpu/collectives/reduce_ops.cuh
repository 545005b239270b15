// Element-wise reduction ops for the collective kernels: fp32, fp16, bf16,
// int32, uint8 x sum, prod, min, max. Values are combined in an
// accumulator type (float for the 16-bit floats, so a chain of ops rounds
// once; uint32 for uint8 and wrapping arithmetic for int32, so integer
// overflow wraps as on the host) and stored back in the element type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace plugboard::gpucoll {

/// Accumulator of an element type, with conversions both ways.
template <typename T>
struct Acc;
template <>
struct Acc<float> {
  using type = float;
  static __device__ __forceinline__ float in(float v) { return v; }
  static __device__ __forceinline__ float out(float v) { return v; }
};
template <>
struct Acc<__half> {
  using type = float;
  static __device__ __forceinline__ float in(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half out(float v) { return __float2half_rn(v); }
};
template <>
struct Acc<__nv_bfloat16> {
  using type = float;
  static __device__ __forceinline__ float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};
template <>
struct Acc<int32_t> {
  using type = uint32_t;  // two's complement wrap without signed overflow
  static __device__ __forceinline__ uint32_t in(int32_t v) { return static_cast<uint32_t>(v); }
  static __device__ __forceinline__ int32_t out(uint32_t v) { return static_cast<int32_t>(v); }
};
template <>
struct Acc<uint8_t> {
  using type = uint32_t;
  static __device__ __forceinline__ uint32_t in(uint8_t v) { return v; }
  static __device__ __forceinline__ uint8_t out(uint32_t v) { return static_cast<uint8_t>(v); }
};

/// Sum and product act on the accumulator; min and max compare as the
/// element type (int32 is carried as uint32, so it is compared signed).
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
  static __device__ __forceinline__ A apply(A a, A b) {
    if constexpr (sizeof(T) == 4 && !std::is_floating_point<T>::value)
      return static_cast<int32_t>(b) < static_cast<int32_t>(a) ? b : a;
    else
      return b < a ? b : a;
  }
};
struct OpMax {
  template <typename T, typename A>
  static __device__ __forceinline__ A apply(A a, A b) {
    if constexpr (sizeof(T) == 4 && !std::is_floating_point<T>::value)
      return static_cast<int32_t>(b) > static_cast<int32_t>(a) ? b : a;
    else
      return b > a ? b : a;
  }
};

/// Loads element i of a buffer written by another GPU or another kernel
/// (L2, not L1: a scratch slot is rewritten through the peer mapping).
template <typename T>
__device__ __forceinline__ T loadElem(const char* base, uint64_t i) {
  if constexpr (sizeof(T) == 4) {
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
template <typename T, typename Op, uint32_t kBatch>
__device__ __forceinline__ void reduceVectors(char* const* dst, int ndst, const char* const* src, int nsrc, uint64_t v,
                                              uint64_t step) {
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
    for (uint32_t j = 0; j < kPer; ++j) acc[b][j] = Acc<T>::in(e[j]);
  }
  for (int k = 1; k < nsrc; ++k) {
#pragma unroll
    for (uint32_t b = 0; b < kBatch; ++b) raw[b] = __ldcg(reinterpret_cast<const int4*>(src[k]) + v + b * step);
#pragma unroll
    for (uint32_t b = 0; b < kBatch; ++b) {
      const T* e = reinterpret_cast<const T*>(&raw[b]);
#pragma unroll
      for (uint32_t j = 0; j < kPer; ++j) acc[b][j] = Op::template apply<T, A>(acc[b][j], Acc<T>::in(e[j]));
    }
  }
#pragma unroll
  for (uint32_t b = 0; b < kBatch; ++b) {
    T* o = reinterpret_cast<T*>(&raw[b]);
#pragma unroll
    for (uint32_t j = 0; j < kPer; ++j) o[j] = Acc<T>::out(acc[b][j]);
    for (int k = 0; k < ndst; ++k) reinterpret_cast<int4*>(dst[k])[v + b * step] = raw[b];
  }
}

/// Element-wise reduction over nsrc sources in source order into ndst
/// outputs, elems elements, split over threads [0, nthreads). 16-byte
/// vectors when every pointer is 16-byte aligned (in batches of kBatch per
/// thread, then single vectors), then a scalar remainder.
template <typename T, typename Op>
__device__ void reduceElems(char* const* dst, int ndst, const char* const* src, int nsrc, uint64_t elems,
                            uint32_t tid, uint32_t nthreads) {
  using A = typename Acc<T>::type;
  // uint8 accumulates 16 words per vector: a batch of 4 would not fit kMaxBlockThreads' registers.
  constexpr uint32_t kPer = 16 / sizeof(T), kBatch = sizeof(T) == 1 ? 2 : 4;
  bool aligned = true;
  for (int k = 0; k < nsrc; ++k) aligned &= (reinterpret_cast<uintptr_t>(src[k]) % 16) == 0;
  for (int k = 0; k < ndst; ++k) aligned &= (reinterpret_cast<uintptr_t>(dst[k]) % 16) == 0;
  uint64_t done = 0;
  if (aligned) {
    const uint64_t vecs = elems / kPer;
    uint64_t v = tid;
    for (; v + (kBatch - 1) * nthreads < vecs; v += kBatch * nthreads)
      reduceVectors<T, Op, kBatch>(dst, ndst, src, nsrc, v, nthreads);
    for (; v < vecs; v += nthreads) reduceVectors<T, Op, 1>(dst, ndst, src, nsrc, v, nthreads);
    done = vecs * kPer;
  }
  for (uint64_t i = done + tid; i < elems; i += nthreads) {
    A acc = Acc<T>::in(loadElem<T>(src[0], i));
    for (int k = 1; k < nsrc; ++k) acc = Op::template apply<T, A>(acc, Acc<T>::in(loadElem<T>(src[k], i)));
    const T out = Acc<T>::out(acc);
    for (int k = 0; k < ndst; ++k) reinterpret_cast<T*>(dst[k])[i] = out;
  }
}

}  // namespace plugboard::gpucoll
