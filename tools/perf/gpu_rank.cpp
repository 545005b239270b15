#include "gpu_rank.hpp"

#include <cstdio>
#include <iostream>

#include "gpu_runner.hpp"
#include "nccl_backend.hpp"
#include "plugboard/communicator.hpp"
#include "plugboard/error.hpp"
#include "report.hpp"

namespace plugboard::perf {
namespace {

/// "GPU 1 NVIDIA H100 (0000:1a:00.0)" for the current device.
std::string deviceText(int device) {
  cudaDeviceProp prop{};
  checkCuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  char buf[320];
  std::snprintf(buf, sizeof(buf), "GPU %d %.256s (%04x:%02x:%02x.0)", device, prop.name, prop.pciDomainID, prop.pciBusID,
                prop.pciDeviceID);
  return buf;
}

/// Rank 0 prints every rank's device and the transport of each pair for GPU memory.
void printGpuPreamble(Communicator& comm, int device, const GpuSetup& setup) {
  std::string mine = "#  rank " + std::to_string(comm.rank()) + " on " + deviceText(device);
  for (int p = 0; p < comm.size(); ++p)
    if (p != comm.rank()) mine += "; -> " + std::to_string(p) + " via " + comm.transportFor(p, MemoryKind::Cuda);
  std::vector<char> all(static_cast<size_t>(comm.size()) * 512, 0);
  mine.copy(all.data() + comm.rank() * 512, 511);
  comm.bootstrap().allGather(all.data(), 512);
  if (comm.rank() != 0) return;
  for (int r = 0; r < comm.size(); ++r) std::cout << all.data() + r * 512 << "\n";
  if (setup.nccl)
    std::cout << "# NCCL " << setup.nccl->versionText() << " from " << setup.nccl->path()
              << (setup.ncclSymmetric ? ", buffers from ncclMemAlloc registered as symmetric windows" : "") << "\n";
}

}  // namespace

int runGpuRank(std::shared_ptr<Bootstrap> bootstrap, int localRank, const Options& opts, Collective c, const GpuSetup& setup) {
  int device = localRank % setup.deviceCount;
  checkCuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  Communicator comm(std::move(bootstrap));
  checkRoot(opts.root, c, comm.size());
  std::string planLine;
  std::unique_ptr<GpuBackend> ours = opts.plan.empty() ? makePlugboardBackend(comm)
                                                       : makePlanBackend(comm, opts.plan, c, opts.maxBytes + 64, &planLine);
  std::unique_ptr<GpuBackend> nccl;
  if (setup.nccl) nccl = std::make_unique<NcclBackend>(setup.nccl, comm.bootstrap(), setup.ncclSymmetric);
  if (comm.rank() == 0) printPreamble(std::cout, comm.size(), opts, c, "gpu");
  printGpuPreamble(comm, device, setup);
  if (comm.rank() == 0 && !planLine.empty()) std::cout << "#  " << planLine << "\n";
  if (comm.rank() == 0) {
    std::string label;
    if (setup.nccl) label = "NCCL " + setup.nccl->versionText() + (setup.ncclSymmetric ? " sym" : "");
    printTableHeader(std::cout, label);
  }
  // Plugboard's device waits end after gpu_wait_timeout; NCCL's never do,
  // so the same host bound serves both.
  const double waitSeconds = 2 * comm.config().getDouble("gpu_wait_timeout");
  std::vector<Row> rows = runGpuSweep(*ours, nccl.get(), comm.bootstrap(), opts, c, waitSeconds);
  return reportRows(comm.bootstrap(), rows, opts, c);
}

}  // namespace plugboard::perf
