// The CUDA the plugin uses: runtime error text, the driver API functions it
// needs (resolved through the runtime, so the plugin never links
// libcuda.so.1 and loads on machines without a driver), and a guard that
// makes a device's primary context current for a call and restores the
// caller's afterwards.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <plugboard/transport.h>

#include <string>

namespace plugboard::cudaipc {

/// "cudaErrorNoDevice (no CUDA-capable device is detected)".
std::string cudaText(cudaError_t error);

/// Throws Error(status, what + ": " + cudaText(error)) unless error is cudaSuccess.
void cudaCheck(cudaError_t error, pb_status status, const std::string& what);

/// Driver API entry points, resolved once with cudaGetDriverEntryPointByVersion.
/// Only valid after get() returned; never unloaded.
struct DriverApi {
  PFN_cuGetErrorName_v6000 getErrorName = nullptr;
  PFN_cuDeviceGet_v2000 deviceGet = nullptr;
  PFN_cuDeviceGetUuid_v11040 deviceGetUuid = nullptr;
  PFN_cuDeviceGetPCIBusId_v4010 deviceGetPCIBusId = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 primaryCtxRetain = nullptr;
  PFN_cuDevicePrimaryCtxRelease_v11000 primaryCtxRelease = nullptr;
  PFN_cuCtxGetCurrent_v4000 ctxGetCurrent = nullptr;
  PFN_cuCtxSetCurrent_v4000 ctxSetCurrent = nullptr;
  PFN_cuCtxGetDevice_v2000 ctxGetDevice = nullptr;
  PFN_cuPointerGetAttributes_v7000 pointerGetAttributes = nullptr;
  PFN_cuMemGetAddressRange_v3020 memGetAddressRange = nullptr;
  PFN_cuMemRetainAllocationHandle_v11000 memRetainAllocationHandle = nullptr;
  PFN_cuMemRelease_v10020 memRelease = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 memExportToShareableHandle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 memImportFromShareableHandle = nullptr;
  PFN_cuMemGetAllocationPropertiesFromHandle_v10020 memGetAllocationPropertiesFromHandle = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 memGetAllocationGranularity = nullptr;
  PFN_cuMemAddressReserve_v10020 memAddressReserve = nullptr;
  PFN_cuMemAddressFree_v10020 memAddressFree = nullptr;
  PFN_cuMemMap_v10020 memMap = nullptr;
  PFN_cuMemUnmap_v10020 memUnmap = nullptr;
  PFN_cuMemSetAccess_v10020 memSetAccess = nullptr;

  /// The table, resolving it on first use (thread-safe). Throws
  /// Error(PB_ERR_UNSUPPORTED) naming the first function the driver lacks.
  static const DriverApi& get();
  /// "CUDA_ERROR_INVALID_VALUE (driver error 1)".
  std::string text(CUresult result) const;
  /// Throws Error(status, what + ": " + text(result)) unless result is CUDA_SUCCESS.
  void check(CUresult result, pb_status status, const std::string& what) const;
};

/// Makes a primary context current on the calling thread for the guard's
/// lifetime, then restores whatever was current before (possibly none), so
/// neither the core's proxy thread nor the user's thread sees its device
/// change behind its back, and no context is ever created on a device the
/// process does not use.
class ContextGuard {
 public:
  /// Makes ctx current; throws Error(PB_ERR_SYSTEM) if the driver refuses.
  explicit ContextGuard(CUcontext ctx);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;

 private:
  CUcontext saved_ = nullptr;
  bool switched_ = false;
};

}  // namespace plugboard::cudaipc
