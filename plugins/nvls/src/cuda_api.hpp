// The real CUDA driver behind NvlsDriver, resolved through the CUDA runtime
// (cudaGetDriverEntryPointByVersion, statically linked), so the plugin
// never links libcuda.so.1 and loads on machines without a driver.
#pragma once

#include "driver.hpp"

namespace plugboard::nvls {

/// The driver's table, resolved on first use (thread-safe). Throws
/// Error(PB_ERR_UNSUPPORTED, "nvls: no CUDA device: ...") where the runtime
/// finds no device or driver. Entries the driver lacks stay NULL (an old
/// driver has no cuMulticast*); supportCost names them before any is used.
const NvlsDriver& realDriver();

}  // namespace plugboard::nvls
