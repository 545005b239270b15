// One rank of a GPU run: picks its device, builds the communicator and the
// backends (Plugboard, and NCCL with --compare nccl), runs the sweep and
// reports. Built only with CUDA (PLUGBOARD_HAVE_CUDA).
#pragma once

#include <memory>

#include "collective_ops.hpp"
#include "nccl_library.hpp"
#include "options.hpp"
#include "plugboard/bootstrap.hpp"

namespace plugboard::perf {

/// What the parent found before any rank touched CUDA.
struct GpuSetup {
  int deviceCount = 0;                 ///< CUDA devices on this host (> 0).
  std::shared_ptr<NcclLibrary> nccl;   ///< Loaded NCCL with --compare nccl, else null.
  bool ncclSymmetric = false;          ///< --nccl-symmetric (nccl has the window functions).
};

/// The body of one GPU rank; returns its exit code (3 when a Plugboard result is wrong).
/// The rank uses device localRank % deviceCount.
int runGpuRank(std::shared_ptr<Bootstrap> bootstrap, int localRank, const Options& opts, Collective c, const GpuSetup& setup);

}  // namespace plugboard::perf
