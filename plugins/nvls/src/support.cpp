#include "support.hpp"

namespace plugboard::nvls {

namespace {

/// attribute of device, or -1 when the driver cannot say.
int attribute(const NvlsDriver& d, CUdevice device, CUdevice_attribute which) {
  int value = 0;
  return d.cuDeviceGetAttribute(&value, which, device) == CUDA_SUCCESS ? value : -1;
}

/// Why the driver cannot make multicast groups, or "".
std::string driverProblem(const NvlsDriver& d) {
  if (!d.cuDriverGetVersion) return "the CUDA driver lacks cuDriverGetVersion";
  int version = 0;
  const CUresult r = d.cuDriverGetVersion(&version);
  if (r != CUDA_SUCCESS) return "cuDriverGetVersion: " + d.text(r);
  if (version < kMinDriverVersion)
    return "the CUDA driver is version " + driverVersionText(version) + "; multicast objects need " +
           driverVersionText(kMinDriverVersion) + " or later";
  const std::string missing = d.missing();
  if (!missing.empty()) return "the CUDA driver " + driverVersionText(version) + " lacks " + missing;
  return "";
}

/// Why device cannot export a handle kind the preference allows, or "".
std::string handleProblem(const HandleSupport& s, int ordinal) {
  const std::string dev = "device " + std::to_string(ordinal);
  if (s.preference == HandlePreference::Fabric && !s.fabric)
    return dev + " cannot export fabric handles (handle_type=fabric)";
  if (s.preference == HandlePreference::PosixFd && !s.posixFd)
    return dev + " cannot export POSIX fd handles (handle_type=posix_fd)";
  if (!s.fabric && !s.posixFd) return dev + " exports neither fabric handles nor POSIX fds";
  return "";
}

}  // namespace

HandleSupport queryHandleSupport(const NvlsDriver& d, CUdevice device, HandlePreference preference) {
  HandleSupport s;
  s.preference = preference;
  s.fabric = attribute(d, device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED) > 0;
  s.posixFd = attribute(d, device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) > 0;
  return s;
}

int supportCost(const NvlsDriver& d, const GroupRequest& request, HandlePreference preference, std::string* why) {
  if (request.nranks < 2) {
    *why = "a multicast group needs at least 2 ranks, this one has " + std::to_string(request.nranks);
    return -1;
  }
  *why = driverProblem(d);
  if (!why->empty()) return -1;
  CUdevice device = 0;
  const CUresult r = d.cuDeviceGet(&device, request.device);
  if (r != CUDA_SUCCESS) {
    *why = "device " + std::to_string(request.device) + ": cuDeviceGet: " + d.text(r);
    return -1;
  }
  const int multicast = attribute(d, device, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED);
  if (multicast <= 0) {
    *why = "device " + std::to_string(request.device) +
           " does not support multicast (needs NVSwitch / NVLink SHARP, Hopper or later)";
    return -1;
  }
  *why = handleProblem(queryHandleSupport(d, device, preference), request.device);
  return why->empty() ? 0 : -1;
}

}  // namespace plugboard::nvls
