/// @file float8.hpp
/// OCP 8-bit floats, E4M3 (no infinities, max 448) and E5M2 (IEEE-like,
/// max 57344), for host reductions and test references: exact decoding,
/// and encoding with round to nearest, ties to even, saturating to the
/// largest finite value (infinities included, as CUDA's __NV_SATFINITE
/// conversions do); NaN stays NaN.
#pragma once

#include <cmath>
#include <cstdint>

namespace plugboard {

/// Layout of one 8-bit float format (1 sign bit, expBits, mantBits).
struct Float8Format {
  int expBits, mantBits, bias;
  float maxFinite;   ///< Largest finite magnitude.
  uint8_t nanBits;   ///< Canonical NaN (without the sign).
  bool hasInfinity;  ///< E5M2: exponent all ones with mantissa 0 is infinity.
};

/// OCP E4M3 ("E4M3FN"): exponent all ones is still finite except S.1111.111 (NaN).
inline constexpr Float8Format kFloat8E4M3{4, 3, 7, 448.0f, 0x7f, false};
/// OCP E5M2: IEEE-style infinities and NaNs.
inline constexpr Float8Format kFloat8E5M2{5, 2, 15, 57344.0f, 0x7e, true};

/// 8-bit float bits -> float (exact).
inline float float8ToFloat(uint8_t b, const Float8Format& f) {
  const bool negative = b & 0x80u;
  const int exp = (b >> f.mantBits) & ((1 << f.expBits) - 1), mant = b & ((1 << f.mantBits) - 1);
  const int expAllOnes = (1 << f.expBits) - 1;
  float v;
  if (!f.hasInfinity && (b & 0x7fu) == 0x7fu) v = NAN;
  else if (f.hasInfinity && exp == expAllOnes) v = mant ? NAN : INFINITY;
  else if (exp == 0) v = std::ldexp(static_cast<float>(mant), 1 - f.bias - f.mantBits);  // subnormal
  else v = std::ldexp(static_cast<float>(mant + (1 << f.mantBits)), exp - f.bias - f.mantBits);
  return negative ? -v : v;
}

/// float -> 8-bit float bits: round to nearest even, saturate to +-maxFinite.
inline uint8_t floatToFloat8(float x, const Float8Format& f) {
  const uint8_t sign = std::signbit(x) ? 0x80u : 0u;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | f.nanBits);
  const float a = std::fabs(x);
  if (a == 0.0f) return sign;
  // Quantum of a's binade (the subnormal one below the smallest normal).
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int minNormalExp = 1 - f.bias, binade = e - 1 < minNormalExp ? minNormalExp : e - 1;
  const float quantum = std::ldexp(1.0f, binade - f.mantBits);
  float q = std::nearbyint(a / quantum) * quantum;  // exact scaling; ties to even (default rounding)
  if (!(q <= f.maxFinite)) q = f.maxFinite;         // also infinity
  if (q == 0.0f) return sign;
  std::frexp(q, &e);  // a rounding carry may have moved q up a binade
  if (e - 1 < minNormalExp) return static_cast<uint8_t>(sign | static_cast<uint32_t>(std::ldexp(q, f.bias - 1 + f.mantBits)));
  const uint32_t exp = static_cast<uint32_t>(e - 1 + f.bias);
  const uint32_t mant = static_cast<uint32_t>(std::ldexp(q, f.mantBits - (e - 1))) - (1u << f.mantBits);
  return static_cast<uint8_t>(sign | (exp << f.mantBits) | mant);
}

}  // namespace plugboard
