#include "collectives/reduce_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

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

template <typename T>
void reduceTyped(T* d, const T* s, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: for (size_t i = 0; i < n; ++i) d[i] = add(d[i], s[i]); return;
    case ReduceOp::Prod: for (size_t i = 0; i < n; ++i) d[i] = mul(d[i], s[i]); return;
    case ReduceOp::Min: for (size_t i = 0; i < n; ++i) d[i] = std::min(d[i], s[i]); return;
    case ReduceOp::Max: for (size_t i = 0; i < n; ++i) d[i] = std::max(d[i], s[i]); return;
  }
  throw Error(ErrorCode::InvalidUsage, "unknown reduction op " + std::to_string(static_cast<int>(op)));
}

// 16- and 8-bit floats: compute in float, round once per element.
template <typename S, float (*ToFloat)(S), S (*FromFloat)(float)>
void reduceNarrow(S* d, const S* s, size_t n, ReduceOp op) {
  constexpr size_t kBlock = 256;
  float a[kBlock], b[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    size_t m = std::min(kBlock, n - base);
    for (size_t i = 0; i < m; ++i) { a[i] = ToFloat(d[base + i]); b[i] = ToFloat(s[base + i]); }
    reduceTyped(a, b, m, op);
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

float e4m3ToFloat(uint8_t b) { return float8ToFloat(b, kFloat8E4M3); }
uint8_t floatToE4m3(float f) { return floatToFloat8(f, kFloat8E4M3); }
float e5m2ToFloat(uint8_t b) { return float8ToFloat(b, kFloat8E5M2); }
uint8_t floatToE5m2(float f) { return floatToFloat8(f, kFloat8E5M2); }

}  // namespace

void reduceInto(void* dst, const void* src, size_t n, DataType type, ReduceOp op) {
  switch (type) {
    case DataType::Int8: return reduceTyped(static_cast<int8_t*>(dst), static_cast<const int8_t*>(src), n, op);
    case DataType::Uint8: return reduceTyped(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n, op);
    case DataType::Int32: return reduceTyped(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n, op);
    case DataType::Uint32: return reduceTyped(static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), n, op);
    case DataType::Int64: return reduceTyped(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n, op);
    case DataType::Uint64: return reduceTyped(static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), n, op);
    case DataType::Float32: return reduceTyped(static_cast<float*>(dst), static_cast<const float*>(src), n, op);
    case DataType::Float64: return reduceTyped(static_cast<double*>(dst), static_cast<const double*>(src), n, op);
    case DataType::Float16:
      return reduceNarrow<uint16_t, halfToFloat, floatToHalf>(static_cast<uint16_t*>(dst),
                                                              static_cast<const uint16_t*>(src), n, op);
    case DataType::BFloat16:
      return reduceNarrow<uint16_t, bfloat16ToFloat, floatToBFloat16>(static_cast<uint16_t*>(dst),
                                                                      static_cast<const uint16_t*>(src), n, op);
    case DataType::Float8E4M3:
      return reduceNarrow<uint8_t, e4m3ToFloat, floatToE4m3>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src),
                                                             n, op);
    case DataType::Float8E5M2:
      return reduceNarrow<uint8_t, e5m2ToFloat, floatToE5m2>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src),
                                                             n, op);
  }
  throw Error(ErrorCode::InvalidUsage, "unknown data type " + std::to_string(static_cast<int>(type)));
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
    case DataType::Float16: return divideNarrow<uint16_t, halfToFloat, floatToHalf>(static_cast<uint16_t*>(buf), n, nranks);
    case DataType::BFloat16:
      return divideNarrow<uint16_t, bfloat16ToFloat, floatToBFloat16>(static_cast<uint16_t*>(buf), n, nranks);
    case DataType::Float8E4M3: return divideNarrow<uint8_t, e4m3ToFloat, floatToE4m3>(static_cast<uint8_t*>(buf), n, nranks);
    case DataType::Float8E5M2: return divideNarrow<uint8_t, e5m2ToFloat, floatToE5m2>(static_cast<uint8_t*>(buf), n, nranks);
  }
}

}  // namespace plugboard
