// The one piece of device code in the plugin: the atomic add that applies a
// signal to a peer's mapped counter, queued on a connection's stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace plugboard::cudaipc {

/// Queues a one-thread kernel on stream that does a system-scope fence, then
/// atomically adds value to *target (a u64 in a peer's mapped memory).
/// Returns the launch's status.
cudaError_t launchSignalAdd(cudaStream_t stream, uint64_t* target, uint64_t value);

/// Loads the signal kernel's module on the current device now (see the .cu).
cudaError_t preloadSignalKernel();

}  // namespace plugboard::cudaipc
