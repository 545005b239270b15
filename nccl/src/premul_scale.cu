#include "premul_scale.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace plugboard::ncclapi {

namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 1024;

/// Element arithmetic: floats in their own width, half types in float,
/// integers as the unsigned type of their width (wrapping, never UB).
template <typename T>
struct Scale {
  __device__ static T mul(T x, T s) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(s)));
    } else {
      return x * s;
    }
  }
};
template <>
struct Scale<__half> {
  __device__ static __half mul(__half x, __half s) { return __float2half_rn(__half2float(x) * __half2float(s)); }
};
template <>
struct Scale<__nv_bfloat16> {
  __device__ static __nv_bfloat16 mul(__nv_bfloat16 x, __nv_bfloat16 s) {
    return __float2bfloat16_rn(__bfloat162float(x) * __bfloat162float(s));
  }
};

/// deviceScalar: read once per thread when the kernel runs (ncclScalarDevice); else hostScalar.
template <typename T>
__global__ void preMulScaleKernel(T* dst, const T* src, size_t count, const T* deviceScalar, T hostScalar) {
  const T s = deviceScalar ? *deviceScalar : hostScalar;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dst[i] = Scale<T>::mul(src[i], s);
}

template <typename T>
cudaError_t launchTyped(void* dst, const void* src, size_t count, const PreMulSum& op, cudaStream_t stream) {
  T hostScalar;
  std::memcpy(&hostScalar, op.hostValue.data(), sizeof(T));
  const T* deviceScalar = op.scalarOnDevice ? static_cast<const T*>(op.deviceScalar) : nullptr;
  const size_t blocks = std::min(kMaxBlocks, (count + kThreads - 1) / kThreads);
  preMulScaleKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<T*>(dst), static_cast<const T*>(src), count, deviceScalar, hostScalar);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launchPreMulScale(void* dst, const void* src, size_t count, const PreMulSum& op, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  switch (op.type) {
    case DataType::Int8: return launchTyped<int8_t>(dst, src, count, op, stream);
    case DataType::Uint8: return launchTyped<uint8_t>(dst, src, count, op, stream);
    case DataType::Int32: return launchTyped<int32_t>(dst, src, count, op, stream);
    case DataType::Uint32: return launchTyped<uint32_t>(dst, src, count, op, stream);
    case DataType::Int64: return launchTyped<int64_t>(dst, src, count, op, stream);
    case DataType::Uint64: return launchTyped<uint64_t>(dst, src, count, op, stream);
    case DataType::Float16: return launchTyped<__half>(dst, src, count, op, stream);
    case DataType::BFloat16: return launchTyped<__nv_bfloat16>(dst, src, count, op, stream);
    case DataType::Float32: return launchTyped<float>(dst, src, count, op, stream);
    case DataType::Float64: return launchTyped<double>(dst, src, count, op, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace plugboard::ncclapi
