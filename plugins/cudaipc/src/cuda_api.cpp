#include "cuda_api.hpp"

#include <mutex>

#include "error.hpp"

namespace plugboard::cudaipc {

std::string cudaText(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + " (" + cudaGetErrorString(error) + ")";
}

void cudaCheck(cudaError_t error, pb_status status, const std::string& what) {
  if (error == cudaSuccess) return;
  cudaGetLastError();  // the call's own error stays behind as the thread's "last error": clear it
  throw Error(status, what + ": " + cudaText(error));
}

namespace {

// The ABI version each function is requested at: the oldest that has the
// signature of the PFN_*_vNNNN typedef it is stored in. Asking by version
// keeps the signature fixed whatever newer variants a driver adds.
template <typename Fn>
void resolve(Fn& fn, const char* symbol, unsigned version, std::string& missing) {
  if (!missing.empty()) return;
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &p, version, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || !p) {
    missing = std::string(symbol) + " (" +
              (e != cudaSuccess ? cudaText(e)
                                : found == cudaDriverEntryPointVersionNotSufficent ? "driver too old"
                                                                                    : "symbol not found") +
              ")";
    return;
  }
  fn = reinterpret_cast<Fn>(p);
}

}  // namespace

const DriverApi& DriverApi::get() {
  static std::once_flag once;
  static DriverApi api;
  static std::string missing;
  std::call_once(once, [] {
    resolve(api.getErrorName, "cuGetErrorName", 6000, missing);
    resolve(api.deviceGet, "cuDeviceGet", 2000, missing);
    resolve(api.deviceGetUuid, "cuDeviceGetUuid", 11040, missing);
    resolve(api.deviceGetPCIBusId, "cuDeviceGetPCIBusId", 4010, missing);
    resolve(api.primaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, missing);
    resolve(api.primaryCtxRelease, "cuDevicePrimaryCtxRelease", 11000, missing);
    resolve(api.ctxGetCurrent, "cuCtxGetCurrent", 4000, missing);
    resolve(api.ctxSetCurrent, "cuCtxSetCurrent", 4000, missing);
    resolve(api.ctxGetDevice, "cuCtxGetDevice", 2000, missing);
    resolve(api.pointerGetAttributes, "cuPointerGetAttributes", 7000, missing);
    resolve(api.memGetAddressRange, "cuMemGetAddressRange", 3020, missing);
    resolve(api.memRetainAllocationHandle, "cuMemRetainAllocationHandle", 11000, missing);
    resolve(api.memRelease, "cuMemRelease", 10020, missing);
    resolve(api.memExportToShareableHandle, "cuMemExportToShareableHandle", 10020, missing);
    resolve(api.memImportFromShareableHandle, "cuMemImportFromShareableHandle", 10020, missing);
    resolve(api.memGetAllocationPropertiesFromHandle, "cuMemGetAllocationPropertiesFromHandle", 10020, missing);
    resolve(api.memGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020, missing);
    resolve(api.memAddressReserve, "cuMemAddressReserve", 10020, missing);
    resolve(api.memAddressFree, "cuMemAddressFree", 10020, missing);
    resolve(api.memMap, "cuMemMap", 10020, missing);
    resolve(api.memUnmap, "cuMemUnmap", 10020, missing);
    resolve(api.memSetAccess, "cuMemSetAccess", 10020, missing);
  });
  IPC_CHECK(missing.empty(), PB_ERR_UNSUPPORTED,
            "cudaipc: the CUDA driver does not provide " + missing + " (driver too old or not installed?)");
  return api;
}

std::string DriverApi::text(CUresult result) const {
  const char* name = nullptr;
  if (!getErrorName || getErrorName(result, &name) != CUDA_SUCCESS || !name) name = "CUDA_ERROR_?";
  return std::string(name) + " (driver error " + std::to_string(static_cast<int>(result)) + ")";
}

void DriverApi::check(CUresult result, pb_status status, const std::string& what) const {
  if (result == CUDA_SUCCESS) return;
  throw Error(status, what + ": " + text(result));
}

ContextGuard::ContextGuard(CUcontext ctx) {
  const DriverApi& d = DriverApi::get();
  d.check(d.ctxGetCurrent(&saved_), PB_ERR_SYSTEM, "cudaipc: cuCtxGetCurrent");
  if (saved_ == ctx) return;
  d.check(d.ctxSetCurrent(ctx), PB_ERR_SYSTEM, "cudaipc: cuCtxSetCurrent");
  switched_ = true;
}

ContextGuard::~ContextGuard() {
  if (switched_) DriverApi::get().ctxSetCurrent(saved_);
}

}  // namespace plugboard::cudaipc
