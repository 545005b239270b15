#include "collectives/reduce_vector.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define PB_VECTOR_REDUCE 1
#endif

namespace plugboard {

#ifdef PB_VECTOR_REDUCE
namespace {

bool hasAvx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

/// F16C from CPUID leaf 1 (clang's __builtin_cpu_supports does not know
/// it); AVX2 being usable means the OS keeps the AVX state F16C needs too.
bool hasAvx2F16c() {
  static const bool yes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return hasAvx2() && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  }();
  return yes;
}

/// op(a, b) on 8 floats, the operands ordered as the scalar std::min /
/// std::max are (b < a ? b : a; a < b ? b : a), so NaN cases agree.
__attribute__((target("avx2"))) inline __m256 combine8(__m256 a, __m256 b, ReduceOp op) {
  switch (op) {
    case ReduceOp::Prod: return _mm256_mul_ps(a, b);
    case ReduceOp::Min: return _mm256_min_ps(b, a);
    case ReduceOp::Max: return _mm256_max_ps(b, a);
    default: return _mm256_add_ps(a, b);  // Sum and Avg (divided at the end)
  }
}

__attribute__((target("avx2,f16c"))) size_t halfLoop(uint16_t* d, const uint16_t* x, const uint16_t* y, size_t n,
                                                    ReduceOp op) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(combine8(a, b, op), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return i;
}

/// 8 bfloat16 values widened to floats (the bits shifted up).
__attribute__((target("avx2"))) inline __m256 loadBFloat16(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

/// 8 floats rounded to bfloat16 as floatToBFloat16 does: ties to even, a NaN quieted.
__attribute__((target("avx2"))) inline __m128i roundBFloat16(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i high = _mm256_srli_epi32(bits, 16);
  const __m256i odd = _mm256_and_si256(high, _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd), 16);
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  const __m256i out = _mm256_movemask_ps(nan) == 0
                          ? rounded
                          : _mm256_blendv_epi8(rounded, _mm256_or_si256(high, _mm256_set1_epi32(0x40)),
                                               _mm256_castps_si256(nan));
  // Every lane <= 0xffff: the pack keeps each; 128-bit halves keep the order.
  return _mm_packus_epi32(_mm256_castsi256_si128(out), _mm256_extracti128_si256(out, 1));
}

__attribute__((target("avx2"))) size_t bfloat16Loop(uint16_t* d, const uint16_t* x, const uint16_t* y, size_t n,
                                                   ReduceOp op) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     roundBFloat16(combine8(loadBFloat16(x + i), loadBFloat16(y + i), op)));
  return i;
}

__attribute__((target("avx2,f16c"))) size_t halfDivideLoop(uint16_t* d, size_t n, float divisor) {
  const __m256 by = _mm256_set1_ps(divisor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    auto* p = reinterpret_cast<__m128i*>(d + i);
    const __m256 q = _mm256_div_ps(_mm256_cvtph_ps(_mm_loadu_si128(p)), by);
    _mm_storeu_si128(p, _mm256_cvtps_ph(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return i;
}

__attribute__((target("avx2"))) size_t bfloat16DivideLoop(uint16_t* d, size_t n, float divisor) {
  const __m256 by = _mm256_set1_ps(divisor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), roundBFloat16(_mm256_div_ps(loadBFloat16(d + i), by)));
  return i;
}

}  // namespace

size_t divideHalfVector(uint16_t* d, size_t n, float divisor) { return hasAvx2F16c() ? halfDivideLoop(d, n, divisor) : 0; }

size_t divideBFloat16Vector(uint16_t* d, size_t n, float divisor) {
  return hasAvx2() ? bfloat16DivideLoop(d, n, divisor) : 0;
}

size_t reduceHalfVector(uint16_t* d, const uint16_t* x, const uint16_t* y, size_t n, ReduceOp op) {
  return hasAvx2F16c() ? halfLoop(d, x, y, n, op) : 0;
}

size_t reduceBFloat16Vector(uint16_t* d, const uint16_t* x, const uint16_t* y, size_t n, ReduceOp op) {
  return hasAvx2() ? bfloat16Loop(d, x, y, n, op) : 0;
}

#else

size_t reduceHalfVector(uint16_t*, const uint16_t*, const uint16_t*, size_t, ReduceOp) { return 0; }
size_t reduceBFloat16Vector(uint16_t*, const uint16_t*, const uint16_t*, size_t, ReduceOp) { return 0; }
size_t divideHalfVector(uint16_t*, size_t, float) { return 0; }
size_t divideBFloat16Vector(uint16_t*, size_t, float) { return 0; }

#endif

}  // namespace plugboard
