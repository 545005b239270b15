// Independent reference for the host collectives tests: per-rank inputs
// chosen so every result is exact in every type, and the expected result
// computed element by element in wide arithmetic.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "plugboard/datatype.hpp"
#include "plugboard/float16.hpp"
#include "plugboard/float8.hpp"

namespace plugboard::test {

/// Every DataType, in enum order.
constexpr DataType kEveryDataType[] = {DataType::Int8,    DataType::Uint8,   DataType::Int32,      DataType::Uint32,
                                       DataType::Int64,   DataType::Uint64,  DataType::Float16,    DataType::BFloat16,
                                       DataType::Float32, DataType::Float64, DataType::Float8E4M3, DataType::Float8E5M2};

inline bool isFloat8(DataType t) { return t == DataType::Float8E4M3 || t == DataType::Float8E5M2; }
inline bool isFloat(DataType t) {
  return t == DataType::Float16 || t == DataType::BFloat16 || t == DataType::Float32 || t == DataType::Float64 ||
         isFloat8(t);
}
inline bool isSigned(DataType t) { return t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64 || isFloat(t); }

/// Byte that receive buffers are filled with before a checked call: as
/// every element type (0x7F..: int8 127, uint8 127, int32 and int64 near
/// their maximum, a NaN for fp16 and fp8, about 3.4e38 for fp32 and bf16,
/// 1.4e306 for fp64) it is no value a collective of these inputs yields,
/// so an element the call did not write is counted wrong.
constexpr unsigned char kPoisonByte = 0x7F;

/// Input element i of rank r: small values so sums and products stay exact.
inline double inputValue(int rank, size_t i, DataType t, ReduceOp op) {
  if (op == ReduceOp::Prod) {  // magnitudes 1 or 2: products of 8 ranks stay <= 256
    static const int pos[] = {1, 2, 1, 1, 2};
    static const int sgn[] = {1, -1, 2, -2, 1};
    const int* v = isSigned(t) ? sgn : pos;
    return v[(rank * 3 + i) % 5];
  }
  // 8-bit floats: -1..1, so partial sums of 8 ranks stay within the
  // integers E5M2 holds exactly (|x| <= 8) whatever the reduction order.
  if (isFloat8(t)) return static_cast<int>((rank * 7 + i * 3 + i / 5) % 3) - 1;
  int v = static_cast<int>((rank * 7 + i * 3 + i / 5) % 9);  // 0..8
  return isSigned(t) ? v - 4 : v;
}

/// Writes value into element i of buf, as type t.
inline void storeValue(void* buf, size_t i, DataType t, double v) {
  char* p = static_cast<char*>(buf) + i * dataTypeSize(t);
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (t) {
    case DataType::Int8: put(static_cast<int8_t>(static_cast<int64_t>(v))); break;
    case DataType::Uint8: put(static_cast<uint8_t>(static_cast<uint64_t>(static_cast<int64_t>(v)))); break;
    case DataType::Int32: put(static_cast<int32_t>(static_cast<int64_t>(v))); break;
    case DataType::Uint32: put(static_cast<uint32_t>(static_cast<uint64_t>(static_cast<int64_t>(v)))); break;
    case DataType::Int64: put(static_cast<int64_t>(v)); break;
    case DataType::Uint64: put(static_cast<uint64_t>(static_cast<int64_t>(v))); break;
    case DataType::Float16: put(floatToHalf(static_cast<float>(v))); break;
    case DataType::BFloat16: put(floatToBFloat16(static_cast<float>(v))); break;
    case DataType::Float32: put(static_cast<float>(v)); break;
    case DataType::Float64: put(v); break;
    case DataType::Float8E4M3: put(floatToFloat8(static_cast<float>(v), kFloat8E4M3)); break;
    case DataType::Float8E5M2: put(floatToFloat8(static_cast<float>(v), kFloat8E5M2)); break;
  }
}

/// Reads element i of buf as a double (integers exactly, wrapped to the type).
inline double loadValue(const void* buf, size_t i, DataType t) {
  const char* p = static_cast<const char*>(buf) + i * dataTypeSize(t);
  auto get = [p](auto x) { std::memcpy(&x, p, sizeof(x)); return x; };
  switch (t) {
    case DataType::Int8: return get(int8_t{});
    case DataType::Uint8: return get(uint8_t{});
    case DataType::Int32: return get(int32_t{});
    case DataType::Uint32: return get(uint32_t{});
    case DataType::Int64: return static_cast<double>(get(int64_t{}));
    case DataType::Uint64: return static_cast<double>(get(uint64_t{}));
    case DataType::Float16: return halfToFloat(get(uint16_t{}));
    case DataType::BFloat16: return bfloat16ToFloat(get(uint16_t{}));
    case DataType::Float32: return get(float{});
    case DataType::Float64: return get(double{});
    case DataType::Float8E4M3: return float8ToFloat(get(uint8_t{}), kFloat8E4M3);
    case DataType::Float8E5M2: return float8ToFloat(get(uint8_t{}), kFloat8E5M2);
  }
  return 0;
}

/// Expected element i of op over ranks 0..n-1, as stored in type t.
inline double expectedValue(size_t i, int n, DataType t, ReduceOp op) {
  double acc = inputValue(0, i, t, op);
  for (int r = 1; r < n; ++r) {
    double v = inputValue(r, i, t, op);
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::Avg: acc += v; break;
      case ReduceOp::Prod: acc *= v; break;
      case ReduceOp::Min: acc = v < acc ? v : acc; break;
      case ReduceOp::Max: acc = v > acc ? v : acc; break;
    }
  }
  if (op == ReduceOp::Avg) {
    if (isFloat(t)) acc /= n;
    else acc = static_cast<double>(static_cast<int64_t>(acc) / n);  // C++ truncation, as the integer types do
  }
  char tmp[8];
  storeValue(tmp, 0, t, acc);  // wrap / round to the type exactly as stored
  return loadValue(tmp, 0, t);
}

/// Fills count elements of buf with rank's inputs starting at element `first`.
inline void fillInputs(void* buf, size_t count, size_t first, int rank, DataType t, ReduceOp op) {
  for (size_t i = 0; i < count; ++i) storeValue(buf, i, t, inputValue(rank, first + i, t, op));
}

/// Relative size of one rounding step of a narrow float type (0: none checked).
inline double roundingStep(DataType t) {
  switch (t) {
    case DataType::Float16: return 1e-3;
    case DataType::BFloat16: return 8e-3;
    case DataType::Float8E4M3: return 0.0625;  // 3 mantissa bits
    case DataType::Float8E5M2: return 0.125;   // 2 mantissa bits
    default: return 0;
  }
}

/// Values match: exactly, except avg of narrow floats (one extra rounding allowed).
inline bool sameValue(double got, double want, DataType t, ReduceOp op) {
  if (got == want) return true;
  if (op == ReduceOp::Avg && roundingStep(t) > 0) {
    double tol = roundingStep(t) * (want < 0 ? -want : want) + 1e-6;
    return got - want <= tol && want - got <= tol;
  }
  return false;
}

}  // namespace plugboard::test
