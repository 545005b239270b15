/// @file stream_wait.hpp
/// Bounded host waits for GPU work. cudaStreamSynchronize and
/// cudaEventSynchronize wait forever when a kernel never runs or never
/// ends (a peer that never joins, another process's kernels holding the
/// GPU, a broken MPS server); these poll instead and give up with
/// Error(Timeout) naming what was waited for. Requires CUDA.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>

namespace plugboard {

/// Waits until every operation enqueued on stream so far has completed.
/// Throws Error(Timeout) "<what>: the GPU work ... did not finish within
/// <timeoutSeconds> s ..." or Error(System) for a CUDA error the stream reports.
void waitForStream(cudaStream_t stream, double timeoutSeconds, const std::string& what);

/// waitForStream that also calls whileWaiting between polls of the stream
/// (it may throw to end the wait; it throttles itself where it must).
void waitForStream(cudaStream_t stream, double timeoutSeconds, const std::string& what,
                   const std::function<void()>& whileWaiting);

/// Waits until event has completed; errors as waitForStream.
void waitForEvent(cudaEvent_t event, double timeoutSeconds, const std::string& what);

}  // namespace plugboard
