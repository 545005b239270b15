// A core built without CUDA knows no GPU.
#include "plugins/cuda_pci_bus_id.hpp"

namespace plugboard {

pb_status cudaPciBusId(char* buf, size_t) noexcept { return buf ? PB_ERR_UNSUPPORTED : PB_ERR_INVALID; }

}  // namespace plugboard
