// Host reductions of 16-bit floats with the CPU's own conversions: the
// scalar conversions (plugboard/float16.hpp) kept a half-precision
// allreduce at a quarter of a float one's speed (docs/perf session 43).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugboard/datatype.hpp"

namespace plugboard {

/// d[i] = op(x[i], y[i]) on IEEE half bits for the leading multiple of 8
/// elements, computed in float and rounded to nearest even once, as the
/// scalar path does (NaN results stay NaN; their payload may differ), on
/// x86-64 CPUs with AVX2 and F16C. Returns how many elements it did (0 on
/// other CPUs): the caller does the rest. d may be x or y.
size_t reduceHalfVector(uint16_t* d, const uint16_t* x, const uint16_t* y, size_t n, ReduceOp op);

/// The same for bfloat16 bits (AVX2), bit for bit as floatToBFloat16.
size_t reduceBFloat16Vector(uint16_t* d, const uint16_t* x, const uint16_t* y, size_t n, ReduceOp op);

/// d[i] = d[i] / divisor (in float, rounded once) for the leading multiple
/// of 8 elements, half or bfloat16 bits as above; returns how many it did.
size_t divideHalfVector(uint16_t* d, size_t n, float divisor);
size_t divideBFloat16Vector(uint16_t* d, size_t n, float divisor);

}  // namespace plugboard
