// plugboard-perf's output: the nccl-tests table, CSV, and an SVG plot.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "runner.hpp"

namespace plugboard::perf {

/// Prints the nccl-tests column header.
void printTableHeader(std::ostream& out);
/// Prints one row in nccl-tests' layout.
void printRow(std::ostream& out, const Row& row, const Options& opts, Collective c);
/// Prints "# Out of bounds values" and "# Avg bus bandwidth"; returns total wrong.
size_t printFooter(std::ostream& out, const std::vector<Row>& rows);
/// Writes the rows as CSV; throws Error(System) if the file cannot be written.
void writeCsv(const std::string& path, const std::vector<Row>& rows, const Options& opts, Collective c, int nranks);
/// Draws bus bandwidth and time against size as an SVG file.
void writeSvg(const std::string& path, const std::vector<Row>& rows, Collective c, int nranks, const std::string& title);

}  // namespace plugboard::perf
