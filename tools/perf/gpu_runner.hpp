// The GPU sweep one rank runs: for each size, out-of-place then in-place,
// through Plugboard and (with --compare nccl) NCCL on the same device
// buffers: a check, warm-up, then -n iterations timed with CUDA events on one
// stream (or -G launches of a CUDA graph of them). Built only with CUDA.
#pragma once

#include <vector>

#include "gpu_backend.hpp"
#include "options.hpp"
#include "runner.hpp"

namespace plugboard::perf {

/// DeviceBuffers from cudaMalloc on the current device, freed on destruction.
class CudaBuffers : public DeviceBuffers {
 public:
  /// cudaMalloc of both buffers; throws Error(System).
  CudaBuffers(size_t sendBytes, size_t recvBytes);
  ~CudaBuffers() override;
};

/// Runs the whole sweep on the current device; collective over boot. `nccl`
/// may be null (no comparison). Every rank returns the same rows. Every
/// host wait for the GPU gives up after waitSeconds (Error(Timeout)).
std::vector<Row> runGpuSweep(GpuBackend& ours, GpuBackend* nccl, Bootstrap& boot, const Options& opts, Collective c,
                             double waitSeconds);


}  // namespace plugboard::perf
