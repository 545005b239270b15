#include "collectives/reduce_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "collectives/reduce_vector.hpp"
#include "plugboard/error.hpp"
#include "plugboard/float16.hpp"
#include "plugboard/float8.hpp"

namespace plugboard {
namespace {

// Integer sum/prod wrap (done in the unsigned type to avoid undefined overflow).
template <typename T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
T mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

/// d[i] = f(a[i], b[i]); d may be a (the compiler's overlap check lets
/// that case take the vector loop too: measured, GCC 12 -O3).
template <typename T, typename F>
void combine(T* d, const T* a, const T* b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) d[i] = f(a[i], b[i]);
}

template <typename T>
void reduceTyped(T* d, const T* a, const T* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return combine(d, a, b, n, [](T x, T y) { return add(x, y); });
    case ReduceOp::Prod: return combine(d, a, b, n, [](T x, T y) { return mul(x, y); });
    case ReduceOp::Min: return combine(d, a, b, n, [](T x, T y) { return std::min(x, y); });
    case ReduceOp::Max: return combine(d, a, b, n, [](T x, T y) { return std::max(x, y); });
  }
  throw Error(ErrorCode::InvalidUsage, "unknown reduction op " + std::to_string(static_cast<int>(op)));
}

// 16- and 8-bit floats: compute in float, round once per element.
template <typename S, float (*ToFloat)(S), S (*FromFloat)(float)>
void reduceNarrow(S* d, const S* x, const S* y, size_t n, ReduceOp op) {
  constexpr size_t kBlock = 256;
  float a[kBlock], b[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    size_t m = std::min(kBlock, n - base);
    for (size_t i = 0; i < m; ++i) { a[i] = ToFloat(x[base + i]); b[i] = ToFloat(y[base + i]); }
    reduceTyped(a, a, b, m, op);
    for (size_t i = 0; i < m; ++i) d[base + i] = FromFloat(a[i]);
  }
}

template <typename T>
void divideTyped(T* d, size_t n, int nranks) {
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] / static_cast<T>(nranks));
}

template <typename S, float (*ToFloat)(S), S (*FromFloat)(float)>
void divideNarrow(S* d, size_t n, int nranks) {
  for (size_t i = 0; i < n; ++i) d[i] = FromFloat(ToFloat(d[i]) / static_cast<float>(nranks));
}

/// divideNarrow of a 16-bit float type, its vector loop first.
template <size_t (*Vector)(uint16_t*, size_t, float), float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void divideSixteen(uint16_t* d, size_t n, int nranks) {
  const size_t done = Vector(d, n, static_cast<float>(nranks));
  divideNarrow<uint16_t, ToFloat, FromFloat>(d + done, n - done, nranks);
}

float e4m3ToFloat(uint8_t b) { return float8ToFloat(b, kFloat8E4M3); }
uint8_t floatToE4m3(float f) { return floatToFloat8(f, kFloat8E4M3); }
float e5m2ToFloat(uint8_t b) { return float8ToFloat(b, kFloat8E5M2); }
uint8_t floatToE5m2(float f) { return floatToFloat8(f, kFloat8E5M2); }

template <typename T>
void typed(void* d, const void* a, const void* b, size_t n, ReduceOp op) {
  reduceTyped(static_cast<T*>(d), static_cast<const T*>(a), static_cast<const T*>(b), n, op);
}

template <typename S, float (*ToFloat)(S), S (*FromFloat)(float)>
void narrow(void* d, const void* a, const void* b, size_t n, ReduceOp op) {
  reduceNarrow<S, ToFloat, FromFloat>(static_cast<S*>(d), static_cast<const S*>(a), static_cast<const S*>(b), n, op);
}

/// A 16-bit float type: the CPU's vector loop where it has one, the scalar
/// conversions for the rest.
template <size_t (*Vector)(uint16_t*, const uint16_t*, const uint16_t*, size_t, ReduceOp), float (*ToFloat)(uint16_t),
          uint16_t (*FromFloat)(float)>
void sixteen(void* d, const void* a, const void* b, size_t n, ReduceOp op) {
  auto* dst = static_cast<uint16_t*>(d);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  const size_t done = Vector(dst, x, y, n, op);
  reduceNarrow<uint16_t, ToFloat, FromFloat>(dst + done, x + done, y + done, n - done, op);
}

}  // namespace

void reduceOutOf(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op) {
  switch (type) {
    case DataType::Int8: return typed<int8_t>(dst, a, b, n, op);
    case DataType::Uint8: return typed<uint8_t>(dst, a, b, n, op);
    case DataType::Int32: return typed<int32_t>(dst, a, b, n, op);
    case DataType::Uint32: return typed<uint32_t>(dst, a, b, n, op);
    case DataType::Int64: return typed<int64_t>(dst, a, b, n, op);
    case DataType::Uint64: return typed<uint64_t>(dst, a, b, n, op);
    case DataType::Float32: return typed<float>(dst, a, b, n, op);
    case DataType::Float64: return typed<double>(dst, a, b, n, op);
    case DataType::Float16: return sixteen<reduceHalfVector, halfToFloat, floatToHalf>(dst, a, b, n, op);
    case DataType::BFloat16: return sixteen<reduceBFloat16Vector, bfloat16ToFloat, floatToBFloat16>(dst, a, b, n, op);
    case DataType::Float8E4M3: return narrow<uint8_t, e4m3ToFloat, floatToE4m3>(dst, a, b, n, op);
    case DataType::Float8E5M2: return narrow<uint8_t, e5m2ToFloat, floatToE5m2>(dst, a, b, n, op);
  }
  throw Error(ErrorCode::InvalidUsage, "unknown data type " + std::to_string(static_cast<int>(type)));
}

void reduceInto(void* dst, const void* src, size_t n, DataType type, ReduceOp op) {
  reduceOutOf(dst, dst, src, n, type, op);
}

void finishAverage(void* buf, size_t n, DataType type, ReduceOp op, int nranks) {
  if (op != ReduceOp::Avg) return;
  switch (type) {
    case DataType::Int8: return divideTyped(static_cast<int8_t*>(buf), n, nranks);
    case DataType::Uint8: return divideTyped(static_cast<uint8_t*>(buf), n, nranks);
    case DataType::Int32: return divideTyped(static_cast<int32_t*>(buf), n, nranks);
    case DataType::Uint32: return divideTyped(static_cast<uint32_t*>(buf), n, nranks);
    case DataType::Int64: return divideTyped(static_cast<int64_t*>(buf), n, nranks);
    case DataType::Uint64: return divideTyped(static_cast<uint64_t*>(buf), n, nranks);
    case DataType::Float32: return divideTyped(static_cast<float*>(buf), n, nranks);
    case DataType::Float64: return divideTyped(static_cast<double*>(buf), n, nranks);
    case DataType::Float16:
      return divideSixteen<divideHalfVector, halfToFloat, floatToHalf>(static_cast<uint16_t*>(buf), n, nranks);
    case DataType::BFloat16:
      return divideSixteen<divideBFloat16Vector, bfloat16ToFloat, floatToBFloat16>(static_cast<uint16_t*>(buf), n,
                                                                                   nranks);
    case DataType::Float8E4M3: return divideNarrow<uint8_t, e4m3ToFloat, floatToE4m3>(static_cast<uint8_t*>(buf), n, nranks);
    case DataType::Float8E5M2: return divideNarrow<uint8_t, e5m2ToFloat, floatToE5m2>(static_cast<uint8_t*>(buf), n, nranks);
  }
}

}  // namespace plugboard
