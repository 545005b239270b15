// The scaling half of a PreMulSum reduction: dst[i] = scalar x src[i] on a
// stream, before the sum collective runs on dst.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "premul_sum_ops.hpp"

namespace plugboard::ncclapi {

/// Queues dst[i] = op's scalar x src[i] for i < count on stream (dst may be
/// src). Half and bfloat16 multiply in float and round to nearest; integers
/// wrap as unsigned. Returns the launch's error. Float8 types are refused
/// when the op is made, never reach here.
cudaError_t launchPreMulScale(void* dst, const void* src, size_t count, const PreMulSum& op, cudaStream_t stream);

}  // namespace plugboard::ncclapi
