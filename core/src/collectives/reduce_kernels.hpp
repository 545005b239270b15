// Element-wise reductions on host memory, for every DataType x ReduceOp.
#pragma once

#include <cstddef>

#include "plugboard/datatype.hpp"

namespace plugboard {

/// dst[i] = op(dst[i], src[i]) for count elements. Integer arithmetic wraps.
/// Avg accumulates like Sum; finishAverage divides at the end.
void reduceInto(void* dst, const void* src, size_t count, DataType type, ReduceOp op);

/// dst[i] = op(a[i], b[i]) for count elements: the same bits as copying a to
/// dst and then reduceInto(dst, b). dst may be a or b (each element is read
/// before it is written); no other overlap.
void reduceOutOf(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op);

/// buf[i] /= nranks (integer division for integer types). No-op unless op is Avg.
void finishAverage(void* buf, size_t count, DataType type, ReduceOp op, int nranks);

}  // namespace plugboard
