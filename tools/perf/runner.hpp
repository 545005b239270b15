// The sweep one rank runs: for each size, out-of-place then in-place,
// warm-up, timed iterations, and an optional correctness check.
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
};

/// One line of the table.
struct Row {
  size_t bytes = 0;
  Shape shape;
  Measure outOfPlace, inPlace;
};

/// Runs the whole sweep; collective across ranks. Every rank returns the same rows.
std::vector<Row> runSweep(HostCollectives& hc, const Options& opts, Collective c);

/// Message sizes of the sweep, -b to -e by -f or -i.
std::vector<size_t> sweepSizes(const Options& opts);

}  // namespace plugboard::perf
