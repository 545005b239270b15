// The host-buffer sweep one rank runs: for each size, out-of-place then
// in-place, warm-up, timed iterations, and an optional correctness check.
// Row and Measure are shared with the GPU sweep (gpu_runner.hpp).
#pragma once

#include <vector>

#include "collective_ops.hpp"
#include "options.hpp"

namespace plugboard::perf {

/// One placement (out-of-place or in-place) of one row.
struct Measure {
  double timeUs = 0;   ///< Mean time per iteration, averaged over ranks.
  double algBw = 0;    ///< GB/s.
  double busBw = 0;    ///< GB/s.
  size_t wrong = 0;    ///< Wrong elements summed over ranks (0 when not checked).
  /// GPU rows: host time per timed call (us, averaged over ranks): how long
  /// the call (or, with -G, the graph launch's share) kept the calling
  /// thread, i.e. a library's host cost per call. It includes waiting only
  /// when the stream's launch queue is full (keep -n in the hundreds). 0 on host buffers.
  double hostUs = 0;
  bool skipped = false;  ///< Not run (GPU in-place sendrecv: a send and a receive in one buffer race); printed N/A.
};

/// One line of the table.
struct Row {
  size_t bytes = 0;                         ///< Message size (the "size" column).
  Shape shape;                              ///< Element counts of the row.
  Measure outOfPlace, inPlace;              ///< Plugboard.
  bool compared = false;                    ///< True when the NCCL measures below were taken (--compare nccl).
  Measure ncclOutOfPlace, ncclInPlace;      ///< The same row through NCCL.
};

/// Every rank's value, by rank (collective over b).
std::vector<double> gatherDoubles(Bootstrap& b, double mine);

/// Sets m.algBw and m.busBw from m.timeUs (nccl-tests: algbw = bytes / time,
/// busbw = algbw * busBandwidthFactor).
void setBandwidth(Measure& m, size_t bytes, Collective c, int nranks);

/// our time / NCCL's time (0 when either is missing).
double ratioToNccl(const Measure& ours, const Measure& nccl);

/// Runs the whole sweep; collective across ranks. Every rank returns the same rows.
/// plan: run every call through it (its input chunk count rounds the
/// sizes of allreduce-like collectives down to a multiple of it).
/// Rounds an allreduce, broadcast or reduce row's count down to a multiple
/// of a plan's input chunks (the other collectives' counts are the caller's
/// to fit: the plan's run() names a mismatch).
void fitShapeToPlan(Shape& s, Collective c, uint64_t inputChunks);
std::vector<Row> runSweep(HostCollectives& hc, const Options& opts, Collective c, HostPlanExecutor* plan = nullptr);

/// Message sizes of the sweep, -b to -e by -f or -i.
std::vector<size_t> sweepSizes(const Options& opts);

}  // namespace plugboard::perf
