// plugboard-perf: nccl-tests-style collective benchmark over Plugboard, on
// device buffers (GpuCollectives, optionally beside NCCL) or host buffers
// (HostCollectives).
//   plugboard-perf --nranks 4 -b 8 -e 16M -f 4 [-C allreduce] [-d float] [-o sum] [--mem gpu|host|auto]
//                  [--compare nccl] [-G N]
// Exits non-zero if any Plugboard result is wrong or any rank fails.
#include <unistd.h>

#include <iostream>

#include "launch.hpp"
#include "mem_mode.hpp"
#include "nccl_library.hpp"
#include "plugboard/error.hpp"
#include "plugboard/host_collectives.hpp"
#include "report.hpp"
#include "runner.hpp"

#ifdef PLUGBOARD_HAVE_CUDA
#include "gpu_rank.hpp"
#include "gpu_runner.hpp"
#endif

using namespace plugboard;
using namespace plugboard::perf;

namespace {

int hostRankMain(std::shared_ptr<Bootstrap> bootstrap, const Options& opts, Collective c) {
  Communicator comm(std::move(bootstrap));
  checkRoot(opts.root, c, comm.size());
  HostCollectives hc(comm);
  std::unique_ptr<HostPlanExecutor> plan;
  if (!opts.plan.empty()) {
    Plan p = loadPlan(opts.plan);
    if (p.collective != collectiveName(c))
      throw Error(ErrorCode::InvalidUsage, "--plan " + opts.plan + " computes " + p.collective + ", not " + collectiveName(c) + " (-C)");
    plan = std::make_unique<HostPlanExecutor>(comm, std::move(p), opts.maxBytes + 64);
  }
  if (comm.rank() == 0) {
    printPreamble(std::cout, comm.size(), opts, c, "host");
    if (plan) std::cout << "#  through plan " << opts.plan << " (" << plan->plan().name << ")\n";
    for (int p = 1; p < comm.size(); ++p) std::cout << "#  rank 0 -> rank " << p << " via " << comm.transportFor(p) << "\n";
    printTableHeader(std::cout);
  }
  return reportRows(comm.bootstrap(), runSweep(hc, opts, c, plan.get()), opts, c);
}

/// Runs body on --nranks forked ranks, on the launcher's ranks, or on one rank.
int launch(const Options& opts, const RankMain& body) {
  if (opts.nranks > 0) return runLocalRanks(opts.nranks, body);
  if (launchedByLauncher()) return body(bootstrapFromEnvironment());
  return runLocalRanks(1, body);
}

#ifdef PLUGBOARD_HAVE_CUDA
/// GPU mode. NCCL is loaded here, before any fork, so a missing library
/// fails once with every path tried; CUDA itself is first touched by the ranks.
int runGpu(const Options& opts, Collective c, int deviceCount) {
  GpuSetup setup;
  setup.deviceCount = deviceCount;
  if (opts.compareNccl) {
    if (opts.nranks > deviceCount)
      throw Error(ErrorCode::InvalidUsage, "--compare nccl with --nranks " + std::to_string(opts.nranks) + " on " +
                                               std::to_string(deviceCount) +
                                               " GPU(s): NCCL refuses two ranks on one device; use at most one rank per GPU");
    std::string source;
    std::string request = ncclLibraryRequest(opts.ncclLib, &source);
    setup.nccl = NcclLibrary::load(request, source);
    if (opts.ncclSymmetric) setup.nccl->requireWindows("--nccl-symmetric");
    setup.ncclSymmetric = opts.ncclSymmetric;
  }
  return launch(opts, [&](std::shared_ptr<Bootstrap> b) {
    int local = localRankOf(*b);
    return runGpuRank(std::move(b), local, opts, c, setup);
  });
}
#endif

/// --find-nccl: what --compare nccl would load. Needs no GPU.
int findNccl(const Options& opts) {
  std::string source;
  std::string request = ncclLibraryRequest(opts.ncclLib, &source);
  auto lib = NcclLibrary::load(request, source);
  std::cout << "NCCL " << lib->versionText() << " at " << lib->path() << "\n";
  return 0;
}

int run(const Options& opts, Collective c) {
  if (opts.findNccl) return findNccl(opts);
  // Count devices without touching CUDA here when ranks are forked later.
  const bool forksRanks = opts.nranks > 0 || !launchedByLauncher();
  int devices = opts.mem == MemMode::Host ? 0 : forksRanks ? cudaDeviceCountWithoutInit() : cudaDeviceCountHere();
  MemMode mode = resolveMemMode(opts, builtWithCuda(), devices);  // Gpu only when built with CUDA
#ifdef PLUGBOARD_HAVE_CUDA
  if (mode == MemMode::Gpu) return runGpu(opts, c, devices);
#else
  (void)mode;
#endif
  if (opts.mem == MemMode::Auto) std::cout << "# --mem auto: host buffers (" << (builtWithCuda() ? "no CUDA device" : "built without CUDA") << ")\n";
  return launch(opts, [&](std::shared_ptr<Bootstrap> b) { return hostRankMain(std::move(b), opts, c); });
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options opts = parseOptions(argc, argv);
    return run(opts, parseCollective(opts.collective));
  } catch (const Error& e) {
    std::cerr << "plugboard-perf: " << errorCodeName(e.code()) << ": " << e.what() << "\n";
    return e.code() == ErrorCode::InvalidUsage ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "plugboard-perf: " << e.what() << "\n";
    return 1;
  }
}
