// plugboard-perf's output: the nccl-tests table (with NCCL's columns after
// --compare nccl), CSV, and an SVG plot.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "runner.hpp"

namespace plugboard::perf {

/// Prints "# plugboard-perf <version>: <collective>, N ranks, <type>, iters, warmup, check, mem".
void printPreamble(std::ostream& out, int nranks, const Options& opts, Collective c, const std::string& mem);
/// Prints the nccl-tests column header; a non-empty ncclLabel ("NCCL 2.21.5")
/// adds NCCL's time, busbw, #wrong and x_nccl for both placements.
void printTableHeader(std::ostream& out, const std::string& ncclLabel = "");
/// Prints one row in nccl-tests' layout (NCCL's columns when row.compared).
void printRow(std::ostream& out, const Row& row, const Options& opts, Collective c);
/// Prints "# Out of bounds values" and "# Avg bus bandwidth" (and NCCL's
/// and the geometric mean of x_nccl when compared); returns Plugboard's total wrong.
size_t printFooter(std::ostream& out, const std::vector<Row>& rows);
/// Writes the rows as CSV (NCCL's columns appended when compared); throws Error(System) if the file cannot be written.
void writeCsv(const std::string& path, const std::vector<Row>& rows, const Options& opts, Collective c, int nranks);
/// Draws bus bandwidth and time against size as an SVG file (NCCL's curves too when compared).
void writeSvg(const std::string& path, const std::vector<Row>& rows, Collective c, int nranks, const std::string& title);
/// Rank 0 prints the rows and footer and writes --csv/--plot; collective over
/// boot. Returns the exit code: 0, or 3 when a Plugboard result was wrong.
/// (NCCL's wrong values are printed, not counted in the exit code.)
int reportRows(Bootstrap& boot, const std::vector<Row>& rows, const Options& opts, Collective c);

}  // namespace plugboard::perf
