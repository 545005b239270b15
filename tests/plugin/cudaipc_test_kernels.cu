#include "cudaipc_test_kernels.hpp"

namespace cudaipc_test {
namespace {

__global__ void fillKernel(uint8_t* p, size_t n, uint64_t first, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = patternByte(first + i, seed);
}

__global__ void checkKernel(const uint8_t* p, size_t n, uint64_t first, uint32_t seed,
                            unsigned long long* mismatches) {
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    bad += p[i] != patternByte(first + i, seed);
  if (bad) atomicAdd(mismatches, bad);
}

__device__ unsigned long long globalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ unsigned long long loadAcquireSys(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__global__ void waitThenCheckKernel(const unsigned long long* counter, unsigned long long target, const uint8_t* data,
                                    size_t n, uint32_t seed, int* result, unsigned long long timeoutNs) {
  __shared__ int state;
  __shared__ int wrong;
  if (threadIdx.x == 0) {
    wrong = 0;
    state = kWaitOk;
    unsigned long long start = globalTimerNs();
    while (loadAcquireSys(counter) < target) {
      if (globalTimerNs() - start > timeoutNs) {
        state = kWaitTimedOut;
        break;
      }
    }
    // At once, the bytes a copy writes last: a signal that overtook its
    // write is caught here while the copy is still under way.
    if (state == kWaitOk)
      for (size_t i = n > 64 ? n - 64 : 0; i < n; ++i) wrong |= data[i] != patternByte(i, seed);
  }
  __syncthreads();
  if (state == kWaitOk) {
    // Plain loads after the block barrier: ordered after thread 0's acquire.
    // Back to front, for the same reason.
    int bad = 0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) bad |= data[n - 1 - i] != patternByte(n - 1 - i, seed);
    if (bad) atomicOr(&wrong, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) *result = state != kWaitOk ? state : (wrong ? kWaitDataWrong : kWaitOk);
}

__global__ void faultKernel(int* bad) { *reinterpret_cast<volatile int*>(bad) = 1; }

}  // namespace

cudaError_t launchFault(cudaStream_t stream) {
  faultKernel<<<1, 1, 0, stream>>>(reinterpret_cast<int*>(0x10));
  return cudaGetLastError();
}

cudaError_t fillPattern(uint8_t* p, size_t n, uint64_t first, uint32_t seed, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fillKernel<<<256, 256, 0, stream>>>(p, n, first, seed);
  return cudaGetLastError();
}

cudaError_t countMismatches(const uint8_t* p, size_t n, uint64_t first, uint32_t seed,
                            unsigned long long* mismatches, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  checkKernel<<<256, 256, 0, stream>>>(p, n, first, seed, mismatches);
  return cudaGetLastError();
}

cudaError_t waitThenCheck(const unsigned long long* counter, unsigned long long target, const uint8_t* data,
                          size_t n, uint32_t seed, int* result, unsigned long long timeoutNs, cudaStream_t stream) {
  waitThenCheckKernel<<<1, 256, 0, stream>>>(counter, target, data, n, seed, result, timeoutNs);
  return cudaGetLastError();
}

}  // namespace cudaipc_test
