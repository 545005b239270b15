#include "driver.hpp"

#include "error.hpp"

namespace plugboard::nvls {

std::string NvlsDriver::text(CUresult result) const {
  const char* name = nullptr;
  if (!cuGetErrorName || cuGetErrorName(result, &name) != CUDA_SUCCESS || !name) name = "CUDA_ERROR_?";
  return std::string(name) + " (driver error " + std::to_string(static_cast<int>(result)) + ")";
}

void NvlsDriver::check(CUresult result, const std::string& call, pb_status status) const {
  if (result != CUDA_SUCCESS) throw Error(status, call + ": " + text(result));
}

std::string NvlsDriver::missing() const {
  const std::pair<bool, const char*> entries[] = {
      {cuGetErrorName != nullptr, "cuGetErrorName"},
      {cuDriverGetVersion != nullptr, "cuDriverGetVersion"},
      {cuDeviceGet != nullptr, "cuDeviceGet"},
      {cuDeviceGetAttribute != nullptr, "cuDeviceGetAttribute"},
      {cuDevicePrimaryCtxRetain != nullptr, "cuDevicePrimaryCtxRetain"},
      {cuDevicePrimaryCtxRelease_v2 != nullptr, "cuDevicePrimaryCtxRelease"},
      {cuCtxGetCurrent != nullptr, "cuCtxGetCurrent"},
      {cuCtxSetCurrent != nullptr, "cuCtxSetCurrent"},
      {cuMulticastGetGranularity != nullptr, "cuMulticastGetGranularity"},
      {cuMulticastCreate != nullptr, "cuMulticastCreate"},
      {cuMulticastAddDevice != nullptr, "cuMulticastAddDevice"},
      {cuMulticastBindMem != nullptr, "cuMulticastBindMem"},
      {cuMulticastUnbind != nullptr, "cuMulticastUnbind"},
      {cuMemCreate != nullptr, "cuMemCreate"},
      {cuMemRelease != nullptr, "cuMemRelease"},
      {cuMemExportToShareableHandle != nullptr, "cuMemExportToShareableHandle"},
      {cuMemImportFromShareableHandle != nullptr, "cuMemImportFromShareableHandle"},
      {cuMemGetAllocationGranularity != nullptr, "cuMemGetAllocationGranularity"},
      {cuMemAddressReserve != nullptr, "cuMemAddressReserve"},
      {cuMemAddressFree != nullptr, "cuMemAddressFree"},
      {cuMemMap != nullptr, "cuMemMap"},
      {cuMemUnmap != nullptr, "cuMemUnmap"},
      {cuMemSetAccess != nullptr, "cuMemSetAccess"},
  };
  std::string names;
  for (const auto& [present, name] : entries)
    if (!present) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

std::string driverVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) + " (" +
         std::to_string(version) + ")";
}

}  // namespace plugboard::nvls
