#include "plugins/cuda_pci_bus_id.hpp"

#include <cuda_runtime.h>

namespace plugboard {

pb_status cudaPciBusId(char* buf, size_t len) noexcept {
  if (!buf) return PB_ERR_INVALID;
  int device = 0;
  char id[PB_PCI_BUS_ID_LEN] = {0};
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) {
    cudaGetLastError();  // no device: leave no sticky error for the caller
    return PB_ERR_UNSUPPORTED;
  }
  try {
    return copyPciBusId(sysfsPciBusId(id), buf, len);
  } catch (...) {
    return PB_ERR_NOMEM;
  }
}

}  // namespace plugboard
