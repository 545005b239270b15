#include "context.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "error.hpp"

namespace plugboard::cudaipc {

namespace {

/// FNV-1a, 64 bit.
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

/// The kernel's boot id: one value per running kernel, so equal exactly on
/// one machine (containers of one host included, which share GPUs and IPC).
std::string machineId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (in >> id && !id.empty()) return "boot:" + id;
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return std::string("host:") + name;
}

}  // namespace

ProcessIdentity ProcessIdentity::current() {
  ProcessIdentity id;
  id.pid = static_cast<uint32_t>(getpid());
  id.machine = fnv1a(machineId());
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) == 0) id.pidNamespace = static_cast<uint64_t>(st.st_ino);
  return id;
}

std::string DeviceInfo::describe() const {
  return "GPU " + std::to_string(ordinal) + " (" + std::string(pciBusId.data()) + ")";
}

Context::Context(const pb_host_services_v1* host) : host_(host, "cudaipc") {
  // Counting devices loads the driver but creates no context. Without a GPU
  // or driver this is where the plugin bows out, and the core's "auto"
  // transport list skips it with this reason.
  cudaError_t e = cudaGetDeviceCount(&deviceCount_);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(PB_ERR_UNSUPPORTED, "cudaipc: no CUDA device: cudaGetDeviceCount returned " + cudaText(e));
  }
  IPC_CHECK(deviceCount_ > 0, PB_ERR_UNSUPPORTED, "cudaipc: no CUDA device: cudaGetDeviceCount found 0 devices");
  DriverApi::get();
  self_ = ProcessIdentity::current();
  std::random_device seed;
  exportIdBase_ = ((static_cast<uint64_t>(seed()) << 32) ^ seed()) & ~0xffffffffull;
}

Context::~Context() {
  exports_.clear();
  imports_.clear();
  const DriverApi& d = DriverApi::get();
  for (auto& [ordinal, info] : devices_) {
    CUdevice dev = 0;
    if (d.deviceGet(&dev, ordinal) == CUDA_SUCCESS) d.primaryCtxRelease(dev);
  }
}

std::string Context::describeSelf() const {
  return "rank " + std::to_string(host_.rank()) + " (host " + host_.hostname() + ")";
}

const DeviceInfo& Context::device(int ordinal) {
  std::lock_guard<std::mutex> lock(devicesMu_);
  auto it = devices_.find(ordinal);
  if (it != devices_.end()) return *it->second;
  IPC_CHECK(ordinal >= 0 && ordinal < deviceCount_, PB_ERR_INVALID,
            "cudaipc: GPU " + std::to_string(ordinal) + " does not exist (" + std::to_string(deviceCount_) +
                " visible)");
  const DriverApi& d = DriverApi::get();
  std::string what = "cudaipc: GPU " + std::to_string(ordinal) + ": ";
  CUdevice dev = 0;
  d.check(d.deviceGet(&dev, ordinal), PB_ERR_SYSTEM, what + "cuDeviceGet");
  auto info = std::make_unique<DeviceInfo>();
  info->ordinal = ordinal;
  CUuuid uuid{};
  d.check(d.deviceGetUuid(&uuid, dev), PB_ERR_SYSTEM, what + "cuDeviceGetUuid");
  std::memcpy(info->uuid.data(), uuid.bytes, 16);
  d.check(d.deviceGetPCIBusId(info->pciBusId.data(), static_cast<int>(info->pciBusId.size()), dev), PB_ERR_SYSTEM,
          what + "cuDeviceGetPCIBusId");
  info->pciBusId.back() = '\0';
  d.check(d.primaryCtxRetain(&info->primary, dev), PB_ERR_SYSTEM, what + "cuDevicePrimaryCtxRetain");
  const DeviceInfo& ref = *info;
  devices_.emplace(ordinal, std::move(info));
  return ref;
}

int Context::currentDevice() const {
  const DriverApi& d = DriverApi::get();
  CUcontext ctx = nullptr;
  if (d.ctxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return -1;
  CUdevice dev = -1;
  if (d.ctxGetDevice(&dev) != CUDA_SUCCESS) return -1;
  for (int ordinal = 0; ordinal < deviceCount_; ++ordinal) {
    CUdevice candidate = -1;
    if (d.deviceGet(&candidate, ordinal) == CUDA_SUCCESS && candidate == dev) return ordinal;
  }
  return -1;
}

}  // namespace plugboard::cudaipc
