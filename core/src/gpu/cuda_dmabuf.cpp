#include "plugins/cuda_dmabuf.hpp"

#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

using GetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
using GetHandle = CUresult (*)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);

/// A driver entry point by name (nullptr when this driver lacks it).
void* driverEntry(const char* name, int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return fn;
}

/// Whether the calling thread's device can export dma-bufs.
bool deviceExportsDmabuf() {
  int device = 0, supported = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();  // no device: leave no sticky error for the caller
    return false;
  }
  auto getAttribute = reinterpret_cast<GetAttribute>(driverEntry("cuDeviceGetAttribute", 12000));
  return getAttribute && getAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device) == CUDA_SUCCESS &&
         supported != 0;
}

}  // namespace

pb_status exportCudaDmabuf(void* ptr, size_t size, int* fd, uint64_t* offset) noexcept {
  if (!dmabufArgumentsValid(ptr, size, fd, offset)) return PB_ERR_INVALID;
  if (!deviceExportsDmabuf()) return PB_ERR_UNSUPPORTED;
  if (!ptr) return PB_OK;  // the probe
  auto getHandle = reinterpret_cast<GetHandle>(driverEntry("cuMemGetHandleForAddressRange", 11070));
  if (!getHandle) return PB_ERR_UNSUPPORTED;
  // The driver exports whole host pages only.
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(ptr) + size + page - 1) & ~(page - 1);
  int out = -1;
  const CUresult rc = getHandle(&out, static_cast<CUdeviceptr>(begin), end - begin,
                                CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (rc != CUDA_SUCCESS || out < 0) {
    PB_LOG(Info, "NET", "cuMemGetHandleForAddressRange of " << (end - begin) << " bytes at " << ptr
                                                           << " failed (CUresult " << static_cast<int>(rc) << ")");
    return PB_ERR_UNSUPPORTED;
  }
  *fd = out;
  *offset = reinterpret_cast<uintptr_t>(ptr) - begin;
  return PB_OK;
}

}  // namespace plugboard
