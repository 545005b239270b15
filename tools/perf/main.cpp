// plugboard-perf: nccl-tests-style collective benchmark over Plugboard.
//   plugboard-perf --nranks 4 -b 8 -e 16M -f 4 [-C allreduce] [-d float] [-o sum]
// Exits non-zero if any result is wrong or any rank fails.
#include <unistd.h>

#include <iostream>

#include "launch.hpp"
#include "plugboard/error.hpp"
#include "plugboard/host_collectives.hpp"
#include "report.hpp"
#include "runner.hpp"

using namespace plugboard;
using namespace plugboard::perf;

namespace {

void printPreamble(Communicator& comm, const Options& opts, Collective c) {
  std::cout << "# plugboard-perf " << libraryVersion() << ": " << collectiveName(c) << ", " << comm.size()
            << " ranks, " << dataTypeName(opts.type) << ", iters " << opts.iters << ", warmup " << opts.warmup
            << ", check " << (opts.check ? 1 : 0) << "\n";
  for (int p = 0; p < comm.size(); ++p)
    if (p != comm.rank()) std::cout << "#  rank " << comm.rank() << " -> rank " << p << " via " << comm.transportFor(p) << "\n";
}

int rankMain(std::shared_ptr<Bootstrap> bootstrap, const Options& opts, Collective c) {
  Communicator comm(std::move(bootstrap));
  if (collectiveRooted(c) && opts.root >= comm.size())
    throw Error(ErrorCode::InvalidUsage, "-r " + std::to_string(opts.root) + " is not a rank of 0.." + std::to_string(comm.size() - 1));
  HostCollectives hc(comm);
  bool leader = comm.rank() == 0;
  if (leader) {
    printPreamble(comm, opts, c);
    printTableHeader(std::cout);
  }
  std::vector<Row> rows = runSweep(hc, opts, c);
  size_t wrong = 0;
  if (leader) {
    for (const auto& r : rows) printRow(std::cout, r, opts, c);
    wrong = printFooter(std::cout, rows);
    if (!opts.csv.empty()) writeCsv(opts.csv, rows, opts, c, comm.size());
    if (!opts.plot.empty()) writeSvg(opts.plot, rows, c, comm.size(), "plugboard-perf");
  } else {
    for (const auto& r : rows) wrong += r.outOfPlace.wrong + r.inPlace.wrong;
  }
  comm.bootstrap().barrier();
  return wrong == 0 ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options opts = parseOptions(argc, argv);
    Collective c = parseCollective(opts.collective);
    RankMain body = [&](std::shared_ptr<Bootstrap> b) { return rankMain(std::move(b), opts, c); };
    if (opts.nranks > 0) return runLocalRanks(opts.nranks, body);
    if (launchedByLauncher()) return body(bootstrapFromEnvironment());
    return runLocalRanks(1, body);
  } catch (const Error& e) {
    std::cerr << "plugboard-perf: " << errorCodeName(e.code()) << ": " << e.what() << "\n";
    return e.code() == ErrorCode::InvalidUsage ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "plugboard-perf: " << e.what() << "\n";
    return 1;
  }
}
