#include "gpu/staged_counter.hpp"

#include <cuda.h>

#include <string>

#include "gpu/cuda_check.hpp"
#include "gpu/staging_engine.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

StagedCounterWriter::StagedCounterWriter() {
  int device = 0, memOps = 0;
  PB_CUDA_CHECK(cudaGetDevice(&device));
  // The runtime has no attribute for it: ask the driver through its entry points.
  void* getAttribute = nullptr;
  void* writeValue = nullptr;
  cudaDriverEntryPointQueryResult found{};
  PB_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", &getAttribute, 12000, cudaEnableDefault, &found));
  if (found == cudaDriverEntryPointSuccess && getAttribute) {
    using GetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
    if (reinterpret_cast<GetAttribute>(getAttribute)(&memOps, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                                                     device) != CUDA_SUCCESS)
      memOps = 0;
  }
  if (memOps) {
    PB_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &writeValue, 12000, cudaEnableDefault, &found));
    if (found == cudaDriverEntryPointSuccess) write_ = reinterpret_cast<WriteValue64>(writeValue);
  }
  if (!write_) {
    preloadStagingKernels();
    PB_LOG(Warn, "NET", "GPU " << device << " has no 64-bit stream memory operations: staged signals to device "
                               "counters use a one-thread kernel, which waits for a free SM (kernels that fill the "
                               "GPU while waiting for such a signal can then only end by their timeout)");
  }
}

void StagedCounterWriter::add(RegisteredMemoryImpl& region, uint64_t offset, uint64_t value, cudaStream_t stream) {
  auto* counter = reinterpret_cast<uint64_t*>(static_cast<char*>(region.data) + offset);
  if (!write_) return launchStagedAdd(counter, value, stream);
  uint64_t next = 0;
  {
    std::lock_guard<std::mutex> lock(region.mutex);
    auto it = region.stagedCounters.find(offset);
    if (it == region.stagedCounters.end()) {
      // First staged signal to this counter: start from what it holds.
      uint64_t current = 0;
      PB_CUDA_CHECK(cudaMemcpyAsync(&current, counter, sizeof(current), cudaMemcpyDeviceToHost, stream));
      PB_CUDA_CHECK(cudaStreamSynchronize(stream));
      it = region.stagedCounters.emplace(offset, current).first;
    }
    it->second += value;
    next = it->second;
  }
  const int r = write_(stream, reinterpret_cast<unsigned long long>(counter), next, CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r != CUDA_SUCCESS)
    throw Error(ErrorCode::System, "cuStreamWriteValue64 of a staged signal failed (CUresult " + std::to_string(r) + ")");
}

}  // namespace plugboard
