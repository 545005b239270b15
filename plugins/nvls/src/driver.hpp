// The CUDA driver functions the nvls plugin calls, as one table of function
// pointers. The plugin fills it from the real driver (cuda_api.cpp, through
// the CUDA runtime, so the .so never links libcuda.so.1); the unit tests
// fill it with a fake that records every call. Everything that creates,
// binds, maps or releases multicast memory calls through this table only.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <plugboard/transport.h>

#include <string>
#include <vector>

namespace plugboard::nvls {

/// The lowest driver version with multicast objects (CUDA 12.1).
constexpr int kMinDriverVersion = 12010;

/// Driver entry points, each at the ABI version of its PFN typedef. A NULL
/// entry is one the driver does not provide (support() names it).
struct NvlsDriver {
  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;
  PFN_cuDriverGetVersion_v2020 cuDriverGetVersion = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain = nullptr;
  // cuda.h #defines cuDevicePrimaryCtxRelease to this, the 11.0 symbol.
  PFN_cuDevicePrimaryCtxRelease_v11000 cuDevicePrimaryCtxRelease_v2 = nullptr;
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
  PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent = nullptr;
  PFN_cuMulticastGetGranularity_v12010 cuMulticastGetGranularity = nullptr;
  PFN_cuMulticastCreate_v12010 cuMulticastCreate = nullptr;
  PFN_cuMulticastAddDevice_v12010 cuMulticastAddDevice = nullptr;
  PFN_cuMulticastBindMem_v12010 cuMulticastBindMem = nullptr;
  PFN_cuMulticastUnbind_v12010 cuMulticastUnbind = nullptr;
  PFN_cuMemCreate_v10020 cuMemCreate = nullptr;
  PFN_cuMemRelease_v10020 cuMemRelease = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 cuMemExportToShareableHandle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 cuMemImportFromShareableHandle = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity = nullptr;
  PFN_cuMemAddressReserve_v10020 cuMemAddressReserve = nullptr;
  PFN_cuMemAddressFree_v10020 cuMemAddressFree = nullptr;
  PFN_cuMemMap_v10020 cuMemMap = nullptr;
  PFN_cuMemUnmap_v10020 cuMemUnmap = nullptr;
  PFN_cuMemSetAccess_v10020 cuMemSetAccess = nullptr;

  /// "CUDA_ERROR_INVALID_VALUE (driver error 1)".
  std::string text(CUresult result) const;
  /// Throws Error(status, call + ": " + text(result)) unless CUDA_SUCCESS.
  void check(CUresult result, const std::string& call, pb_status status = PB_ERR_SYSTEM) const;
  /// Names of the NULL entries, in declaration order ("" when none is).
  std::string missing() const;
};

/// "12.1 (12010)" for a cuDriverGetVersion value.
std::string driverVersionText(int version);

}  // namespace plugboard::nvls
