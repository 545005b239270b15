#include "gpu/cuda_check.hpp"
#include "gpu/staging_engine.hpp"

namespace plugboard {
namespace {

__global__ void stagedAddKernel(unsigned long long* counter, unsigned long long value) {
  __threadfence_system();  // copies earlier on the stream are complete; order them before the add for every reader
  atomicAdd_system(counter, value);
}

}  // namespace

void preloadStagingKernels() {
  cudaFuncAttributes attrs{};
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attrs, stagedAddKernel));
}

void launchStagedAdd(uint64_t* counter, uint64_t value, cudaStream_t stream) {
  stagedAddKernel<<<1, 1, 0, stream>>>(reinterpret_cast<unsigned long long*>(counter), value);
  PB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace plugboard
