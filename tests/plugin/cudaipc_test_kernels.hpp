// Device helpers of the cudaipc plugin test: fill and check byte patterns,
// and wait on a signal counter then check the data it announces, all on
// any device pointer (local, or a peer's through remote_pointer).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace cudaipc_test {

/// Byte i of the pattern with this seed (host and device agree).
__host__ __device__ inline uint8_t patternByte(uint64_t i, uint32_t seed) {
  return static_cast<uint8_t>((i * 131u + seed * 7u + (i >> 12)) & 0xffu);
}

/// Writes patternByte(first + i, seed) to p[i] for i < n, on stream.
cudaError_t fillPattern(uint8_t* p, size_t n, uint64_t first, uint32_t seed, cudaStream_t stream = nullptr);

/// Counts i < n with p[i] != patternByte(first + i, seed) into *mismatches
/// (device memory, added to), on stream.
cudaError_t countMismatches(const uint8_t* p, size_t n, uint64_t first, uint32_t seed,
                            unsigned long long* mismatches, cudaStream_t stream = nullptr);

/// Result codes of waitThenCheck.
enum WaitResult : int { kWaitOk = 0, kWaitTimedOut = 1, kWaitDataWrong = 2 };

/// One block: waits (system-scope acquire loads) until *counter >= target
/// or timeoutNs pass, then checks data[0, n) against the pattern and
/// stores a WaitResult in *result (device memory). The data check reads
/// only after the counter moved: it fails if a signal overtook its write.
cudaError_t waitThenCheck(const unsigned long long* counter, unsigned long long target, const uint8_t* data,
                          size_t n, uint32_t seed, int* result, unsigned long long timeoutNs,
                          cudaStream_t stream = nullptr);

/// Launches a kernel that stores to an unmapped address, leaving the
/// process's context with a sticky cudaErrorIllegalAddress (for testing how
/// failures are reported; the process must not use CUDA afterwards).
cudaError_t launchFault(cudaStream_t stream = nullptr);

}  // namespace cudaipc_test
