// Launchers of the GPU plan executor's kernels (plan_kernel.cu).
#pragma once

#include <cuda_runtime.h>

#include "gpu/plans/plan_device.hpp"
#include "plugboard/datatype.hpp"

namespace plugboard::gpuplan {

/// One block: every (channel, slice) signals once, then waits once (for
/// plans whose channels are shared by thread blocks; else the plan kernel's
/// blocks make their own handshakes).
void launchHandshake(const PlanArgs& args, cudaStream_t stream);
/// threadBlockCount * slices blocks of `threads` threads; reduces as (type, op) (Avg as Sum).
void launchPlan(const PlanArgs& args, DataType type, ReduceOp op, uint32_t threads, cudaStream_t stream);

}  // namespace plugboard::gpuplan
