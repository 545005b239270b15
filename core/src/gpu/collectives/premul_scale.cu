// The scaling pass of PreMulSum calls that the pipelined kernels cannot
// fuse (plugboard/gpu/collectives.hpp, preMulScale).
#include <algorithm>
#include <cstring>

#include "gpu/collectives/type_dispatch.cuh"
#include "gpu/cuda_check.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/collectives.hpp"

namespace plugboard {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 1024;

/// device: read once per thread when the kernel runs; else hostScalar.
template <typename T>
__global__ void preMulScaleKernel(T* dst, const T* src, size_t count, const T* device, T hostScalar) {
  const T s = device ? *device : hostScalar;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dst[i] = gpucoll::preMul(src[i], s);
}

}  // namespace

void preMulScale(void* dst, const void* src, size_t count, DataType type, const PreMulScalar& scalar,
                 cudaStream_t stream) {
  if (type == DataType::Float8E4M3 || type == DataType::Float8E5M2)
    throw Error(ErrorCode::InvalidUsage, "PreMulSum: no 8-bit float type (got " + std::string(dataTypeName(type)) + ")");
  if (count == 0) return;
  gpucoll::dispatchTypeOp(type, ReduceOp::Sum, [&](auto t, auto) {
    using T = decltype(t);
    T host;
    std::memcpy(&host, scalar.hostValue.data(), sizeof(T));
    const unsigned blocks = static_cast<unsigned>(std::min(kMaxBlocks, (count + kThreads - 1) / kThreads));
    preMulScaleKernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(dst), static_cast<const T*>(src), count,
                                                         static_cast<const T*>(scalar.device), host);
  });
  PB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace plugboard
