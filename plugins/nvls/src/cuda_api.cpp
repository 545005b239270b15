#include "cuda_api.hpp"

#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "error.hpp"

namespace plugboard::nvls {

namespace {

/// "cudaErrorNoDevice (no CUDA-capable device is detected)".
std::string cudaText(cudaError_t e) { return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")"; }

/// Stores symbol's entry point at `version` (the oldest with the signature
/// of fn's PFN typedef) in fn, or leaves fn NULL when the driver lacks it.
template <typename Fn>
void resolve(Fn& fn, const char* symbol, unsigned version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &p, version, cudaEnableDefault, &found) == cudaSuccess &&
      found == cudaDriverEntryPointSuccess && p)
    fn = reinterpret_cast<Fn>(p);
  else
    cudaGetLastError();  // leave no sticky runtime error behind for the caller's thread
}

/// Fills d from the driver.
void resolveAll(NvlsDriver& d) {
  resolve(d.cuGetErrorName, "cuGetErrorName", 6000);
  resolve(d.cuDriverGetVersion, "cuDriverGetVersion", 2020);
  resolve(d.cuDeviceGet, "cuDeviceGet", 2000);
  resolve(d.cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000);
  resolve(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000);
  resolve(d.cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 11000);
  resolve(d.cuCtxGetCurrent, "cuCtxGetCurrent", 4000);
  resolve(d.cuCtxSetCurrent, "cuCtxSetCurrent", 4000);
  resolve(d.cuMulticastGetGranularity, "cuMulticastGetGranularity", 12010);
  resolve(d.cuMulticastCreate, "cuMulticastCreate", 12010);
  resolve(d.cuMulticastAddDevice, "cuMulticastAddDevice", 12010);
  resolve(d.cuMulticastBindMem, "cuMulticastBindMem", 12010);
  resolve(d.cuMulticastUnbind, "cuMulticastUnbind", 12010);
  resolve(d.cuMemCreate, "cuMemCreate", 10020);
  resolve(d.cuMemRelease, "cuMemRelease", 10020);
  resolve(d.cuMemExportToShareableHandle, "cuMemExportToShareableHandle", 10020);
  resolve(d.cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle", 10020);
  resolve(d.cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020);
  resolve(d.cuMemAddressReserve, "cuMemAddressReserve", 10020);
  resolve(d.cuMemAddressFree, "cuMemAddressFree", 10020);
  resolve(d.cuMemMap, "cuMemMap", 10020);
  resolve(d.cuMemUnmap, "cuMemUnmap", 10020);
  resolve(d.cuMemSetAccess, "cuMemSetAccess", 10020);
}

}  // namespace

const NvlsDriver& realDriver() {
  static std::once_flag once;
  static NvlsDriver driver;
  static std::string absent;  // why there is no driver, "" when there is
  std::call_once(once, [] {
    // Counting devices loads the driver but creates no context.
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();
      absent = "nvls: no CUDA device: cudaGetDeviceCount returned " + cudaText(e);
    } else if (count == 0) {
      absent = "nvls: no CUDA device: cudaGetDeviceCount found 0 devices";
    } else {
      resolveAll(driver);
    }
  });
  NVLS_CHECK(absent.empty(), PB_ERR_UNSUPPORTED, absent);
  return driver;
}

}  // namespace plugboard::nvls
