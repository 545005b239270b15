// The core's cuda_pci_bus_id host service (transport ABI minor 5): the PCI
// bus id of the calling thread's CUDA device, so network plugins pick the
// NIC nearest the GPU without linking CUDA. Built from
// src/gpu/cuda_pci_bus_id.cpp with CUDA, src/plugins/nocuda/cuda_pci_bus_id.cpp
// without (which always answers PB_ERR_UNSUPPORTED).
#pragma once

#include <plugboard/transport.h>

#include <cctype>
#include <cstddef>
#include <cstring>
#include <string>

namespace plugboard {

/// A bus id as sysfs names its device ("0000:3b:00.0"): lowercase, and a
/// domain of 8 digits ("00000000:3B:00.0", as nvidia-smi prints) cut to 4
/// when its high digits are 0. Other text comes back lowercased only.
inline std::string sysfsPciBusId(std::string id) {
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t colon = id.find(':');
  if (colon == 8 && id.compare(0, 4, "0000") == 0) id.erase(0, 4);
  return id;
}

/// Copies id with its NUL into buf: PB_ERR_NOMEM when len cannot hold it.
inline pb_status copyPciBusId(const std::string& id, char* buf, size_t len) {
  if (id.size() + 1 > len) return PB_ERR_NOMEM;
  std::memcpy(buf, id.c_str(), id.size() + 1);
  return PB_OK;
}

/// pb_host_services_v1::cuda_pci_bus_id without the core handle. Never throws.
pb_status cudaPciBusId(char* buf, size_t len) noexcept;

}  // namespace plugboard
