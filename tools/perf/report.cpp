#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "plugboard/error.hpp"

namespace plugboard::perf {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string timeText(double us) { return fmt(us < 10000 ? "%.2f" : "%.1f", us); }

std::string measureText(const Measure& m, bool checked) {
  if (m.skipped) return "      N/A     N/A     N/A    N/A";
  char buf[128];
  std::snprintf(buf, sizeof(buf), " %8s %7.2f %7.2f %6s", timeText(m.timeUs).c_str(), m.algBw, m.busBw,
                checked ? std::to_string(m.wrong).c_str() : "N/A");
  return buf;
}

/// NCCL's time, busbw, #wrong, and our time / its time.
std::string ncclText(const Measure& ours, const Measure& nccl, bool checked) {
  if (nccl.skipped) return "      N/A     N/A    N/A    N/A";
  char buf[128];
  std::snprintf(buf, sizeof(buf), " %8s %7.2f %6s %6.2f", timeText(nccl.timeUs).c_str(), nccl.busBw,
                checked ? std::to_string(nccl.wrong).c_str() : "N/A", ratioToNccl(ours, nccl));
  return buf;
}

std::ofstream openOrThrow(const std::string& path) {
  std::ofstream f(path);
  if (!f) throw Error(ErrorCode::System, "cannot write '" + path + "'");
  return f;
}

/// Geometric mean of x_nccl over the rows (0 if none).
double meanRatio(const std::vector<Row>& rows, bool inPlace) {
  double logSum = 0;
  int n = 0;
  for (const auto& r : rows) {
    double x = inPlace ? ratioToNccl(r.inPlace, r.ncclInPlace) : ratioToNccl(r.outOfPlace, r.ncclOutOfPlace);
    if (x > 0) { logSum += std::log(x); ++n; }
  }
  return n ? std::exp(logSum / n) : 0;
}

/// Mean host time per call over the rows' placements that ran (ours, or NCCL's); 0 if none.
double meanHostUs(const std::vector<Row>& rows, bool nccl) {
  double sum = 0;
  int n = 0;
  for (const auto& r : rows) {
    const Measure* both[2] = {nccl ? &r.ncclOutOfPlace : &r.outOfPlace, nccl ? &r.ncclInPlace : &r.inPlace};
    for (const Measure* m : both)
      if (!m->skipped && m->hostUs > 0) {
        sum += m->hostUs;
        ++n;
      }
  }
  return n ? sum / n : 0;
}

}  // namespace

void printPreamble(std::ostream& out, int nranks, const Options& opts, Collective c, const std::string& mem) {
  out << "# plugboard-perf " << libraryVersion() << ": " << collectiveName(c) << ", " << nranks << " ranks, "
      << dataTypeName(opts.type) << ", iters " << opts.iters << ", warmup " << opts.warmup << ", check "
      << (opts.check ? 1 : 0) << ", mem " << mem;
  if (opts.graphLaunches > 0) out << ", CUDA graph launches " << opts.graphLaunches;
  out << "\n";
}

void printTableHeader(std::ostream& out, const std::string& ncclLabel) {
  bool nccl = !ncclLabel.empty();
  char top[160] = "";
  if (nccl) std::snprintf(top, sizeof(top), "   %-33s %s", (ncclLabel + " out-of-place").c_str(), (ncclLabel + " in-place").c_str());
  out << "#\n#                                                              out-of-place                       in-place"
      << (nccl ? "          " : "") << top << "\n"
      << "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
      << (nccl ? "     time   busbw #wrong x_nccl     time   busbw #wrong x_nccl" : "") << "\n"
      << "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"
      << (nccl ? "            (us)  (GB/s)                   (us)  (GB/s)" : "") << "\n";
}

void printRow(std::ostream& out, const Row& row, const Options& opts, Collective c) {
  char head[128];
  std::snprintf(head, sizeof(head), "%12zu  %12zu  %8s  %6s  %6d", row.bytes, row.shape.totalElements,
                dataTypeName(opts.type), collectiveReduces(c) ? reduceOpName(opts.op) : "none",
                collectiveRooted(c) ? opts.root : -1);
  out << head << measureText(row.outOfPlace, opts.check) << measureText(row.inPlace, opts.check);
  if (row.compared)
    out << ncclText(row.outOfPlace, row.ncclOutOfPlace, opts.check) << ncclText(row.inPlace, row.ncclInPlace, opts.check);
  out << "\n";
  out.flush();
}

size_t printFooter(std::ostream& out, const std::vector<Row>& rows) {
  size_t wrong = 0, ncclWrong = 0;
  double bw = 0, ncclBw = 0;
  bool compared = false;
  for (const auto& r : rows) {
    wrong += r.outOfPlace.wrong + r.inPlace.wrong;
    bw += r.inPlace.skipped ? r.outOfPlace.busBw : (r.outOfPlace.busBw + r.inPlace.busBw) / 2;
    ncclWrong += r.ncclOutOfPlace.wrong + r.ncclInPlace.wrong;
    ncclBw += r.ncclInPlace.skipped ? r.ncclOutOfPlace.busBw : (r.ncclOutOfPlace.busBw + r.ncclInPlace.busBw) / 2;
    compared = compared || r.compared;
  }
  double n = rows.empty() ? 1.0 : static_cast<double>(rows.size());
  out << "# Out of bounds values : " << wrong << (wrong ? " FAILED" : " OK") << "\n";
  out << "# Avg bus bandwidth    : " << fmt("%.5g", bw / n) << "\n";
  const double host = meanHostUs(rows, false);
  if (host > 0) out << "# Host time per call   : " << fmt("%.3f", host) << " us (mean over rows, both placements)\n";
  if (compared) {
    out << "# NCCL out of bounds   : " << ncclWrong << (ncclWrong ? " WRONG" : " OK") << " (not in the exit status)\n";
    out << "# NCCL avg bus bandwidth: " << fmt("%.5g", ncclBw / n) << "\n";
    out << "# x_nccl geometric mean: " << fmt("%.3f", meanRatio(rows, false)) << " out-of-place, "
        << fmt("%.3f", meanRatio(rows, true)) << " in-place (our time / NCCL's; < 1 is faster)\n";
    if (host > 0) out << "# NCCL host time per call: " << fmt("%.3f", meanHostUs(rows, true)) << " us\n";
  }
  out << "#\n";
  return wrong;
}

void writeCsv(const std::string& path, const std::vector<Row>& rows, const Options& opts, Collective c, int nranks) {
  std::ofstream f = openOrThrow(path);
  bool compared = !rows.empty() && rows.front().compared;
  f << "collective,nranks,size_bytes,count,type,redop,root,oop_time_us,oop_algbw_gbs,oop_busbw_gbs,oop_wrong,"
       "ip_time_us,ip_algbw_gbs,ip_busbw_gbs,ip_wrong";
  if (compared)
    f << ",nccl_oop_time_us,nccl_oop_algbw_gbs,nccl_oop_busbw_gbs,nccl_oop_wrong,oop_x_nccl,"
         "nccl_ip_time_us,nccl_ip_algbw_gbs,nccl_ip_busbw_gbs,nccl_ip_wrong,ip_x_nccl";
  f << ",oop_host_us,ip_host_us";  // last, so readers of the columns above keep their indices
  if (compared) f << ",nccl_oop_host_us,nccl_ip_host_us";
  f << "\n";
  for (const auto& r : rows) {
    f << collectiveName(c) << "," << nranks << "," << r.bytes << "," << r.shape.totalElements << ","
      << dataTypeName(opts.type) << "," << (collectiveReduces(c) ? reduceOpName(opts.op) : "none") << ","
      << (collectiveRooted(c) ? opts.root : -1);
    for (const Measure* m : {&r.outOfPlace, &r.inPlace})
      f << "," << m->timeUs << "," << m->algBw << "," << m->busBw << "," << m->wrong;
    if (compared)
      for (auto [ours, nccl] : {std::pair{&r.outOfPlace, &r.ncclOutOfPlace}, std::pair{&r.inPlace, &r.ncclInPlace}})
        f << "," << nccl->timeUs << "," << nccl->algBw << "," << nccl->busBw << "," << nccl->wrong << ","
          << ratioToNccl(*ours, *nccl);
    f << "," << r.outOfPlace.hostUs << "," << r.inPlace.hostUs;
    if (compared) f << "," << r.ncclOutOfPlace.hostUs << "," << r.ncclInPlace.hostUs;
    f << "\n";
  }
}

int reportRows(Bootstrap& boot, const std::vector<Row>& rows, const Options& opts, Collective c) {
  size_t wrong = 0;
  if (boot.rank() == 0) {
    for (const auto& r : rows) printRow(std::cout, r, opts, c);
    wrong = printFooter(std::cout, rows);
    if (!opts.csv.empty()) writeCsv(opts.csv, rows, opts, c, boot.size());
    if (!opts.plot.empty()) writeSvg(opts.plot, rows, c, boot.size(), "plugboard-perf");
  } else {
    for (const auto& r : rows) wrong += r.outOfPlace.wrong + r.inPlace.wrong;
  }
  boot.barrier();
  return wrong == 0 ? 0 : 3;
}

}  // namespace plugboard::perf
