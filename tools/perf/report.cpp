#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "plugboard/error.hpp"

namespace plugboard::perf {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string measureText(const Measure& m, bool checked) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), " %8s %7.2f %7.2f %6s", fmt(m.timeUs < 10000 ? "%.2f" : "%.1f", m.timeUs).c_str(),
                m.algBw, m.busBw, checked ? std::to_string(m.wrong).c_str() : "N/A");
  return buf;
}

std::ofstream openOrThrow(const std::string& path) {
  std::ofstream f(path);
  if (!f) throw Error(ErrorCode::System, "cannot write '" + path + "'");
  return f;
}

}  // namespace

void printTableHeader(std::ostream& out) {
  out << "#\n#                                                              out-of-place                       in-place\n"
         "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n";
}

void printRow(std::ostream& out, const Row& row, const Options& opts, Collective c) {
  char head[128];
  std::snprintf(head, sizeof(head), "%12zu  %12zu  %8s  %6s  %6d", row.bytes, row.shape.totalElements,
                dataTypeName(opts.type), collectiveReduces(c) ? reduceOpName(opts.op) : "none",
                collectiveRooted(c) ? opts.root : -1);
  out << head << measureText(row.outOfPlace, opts.check) << measureText(row.inPlace, opts.check) << "\n";
  out.flush();
}

size_t printFooter(std::ostream& out, const std::vector<Row>& rows) {
  size_t wrong = 0;
  double bw = 0;
  for (const auto& r : rows) {
    wrong += r.outOfPlace.wrong + r.inPlace.wrong;
    bw += (r.outOfPlace.busBw + r.inPlace.busBw) / 2;
  }
  out << "# Out of bounds values : " << wrong << (wrong ? " FAILED" : " OK") << "\n";
  out << "# Avg bus bandwidth    : " << fmt("%.5g", rows.empty() ? 0 : bw / rows.size()) << "\n#\n";
  return wrong;
}

void writeCsv(const std::string& path, const std::vector<Row>& rows, const Options& opts, Collective c, int nranks) {
  std::ofstream f = openOrThrow(path);
  f << "collective,nranks,size_bytes,count,type,redop,root,oop_time_us,oop_algbw_gbs,oop_busbw_gbs,oop_wrong,"
       "ip_time_us,ip_algbw_gbs,ip_busbw_gbs,ip_wrong\n";
  for (const auto& r : rows) {
    f << collectiveName(c) << "," << nranks << "," << r.bytes << "," << r.shape.totalElements << ","
      << dataTypeName(opts.type) << "," << (collectiveReduces(c) ? reduceOpName(opts.op) : "none") << ","
      << (collectiveRooted(c) ? opts.root : -1);
    for (const Measure* m : {&r.outOfPlace, &r.inPlace})
      f << "," << m->timeUs << "," << m->algBw << "," << m->busBw << "," << m->wrong;
    f << "\n";
  }
}

}  // namespace plugboard::perf
