// A dependency-free SVG chart: bus bandwidth (left panel) and time (right
// panel, log scale) against message size (log scale); Plugboard's curves,
// and NCCL's beside them after --compare nccl.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "plugboard/error.hpp"
#include "report.hpp"

namespace plugboard::perf {
namespace {

constexpr double kW = 420, kH = 300, kPad = 55;

struct Panel {
  double x0;  // left edge of the panel
  double minX, maxX, minY, maxY;
  bool logY;
  double px(double v) const { return x0 + kPad + (std::log2(v) - minX) / std::max(1e-9, maxX - minX) * (kW - 2 * kPad); }
  double py(double v) const {
    double t = logY ? (std::log10(std::max(v, 1e-3)) - minY) / std::max(1e-9, maxY - minY) : (v - minY) / std::max(1e-9, maxY - minY);
    return kH - kPad - t * (kH - 2 * kPad) + 30;
  }
};

std::string sizeLabel(double bytes) {
  const char* units[] = {"B", "K", "M", "G"};
  int u = 0;
  while (bytes >= 1024 && u < 3) { bytes /= 1024; ++u; }
  std::ostringstream s;
  s << bytes << units[u];
  return s.str();
}

void axes(std::ostream& f, const Panel& p, const std::string& ylabel, const std::vector<Row>& rows) {
  double left = p.x0 + kPad, bottom = kH - kPad + 30;
  f << "<line x1='" << left << "' y1='" << bottom << "' x2='" << p.x0 + kW - kPad << "' y2='" << bottom << "' stroke='black'/>\n";
  f << "<line x1='" << left << "' y1='" << 30 + kPad << "' x2='" << left << "' y2='" << bottom << "' stroke='black'/>\n";
  f << "<text x='" << p.x0 + kW / 2 << "' y='" << kH + 25 << "' text-anchor='middle' font-size='12'>message size</text>\n";
  f << "<text x='" << p.x0 + 14 << "' y='" << kH / 2 + 30 << "' font-size='12' transform='rotate(-90 " << p.x0 + 14 << " "
    << kH / 2 + 30 << ")' text-anchor='middle'>" << ylabel << "</text>\n";
  size_t step = std::max<size_t>(1, rows.size() / 6);
  for (size_t i = 0; i < rows.size(); i += step)
    f << "<text x='" << p.px(std::max<double>(1, rows[i].bytes)) << "' y='" << bottom + 14
      << "' text-anchor='middle' font-size='10'>" << sizeLabel(static_cast<double>(rows[i].bytes)) << "</text>\n";
  for (int k = 0; k <= 4; ++k) {
    double t = p.minY + (p.maxY - p.minY) * k / 4;
    double v = p.logY ? std::pow(10, t) : t;
    std::ostringstream lbl;
    lbl.precision(3);
    lbl << v;
    f << "<text x='" << left - 4 << "' y='" << p.py(v) + 4 << "' text-anchor='end' font-size='10'>" << lbl.str() << "</text>\n";
  }
}

/// Which of a row's four measures a curve draws.
struct Curve {
  bool nccl, inPlace;
  const char* color;
  const char* dash;  // SVG stroke-dasharray, "" for solid
  const Measure& of(const Row& r) const {
    return nccl ? (inPlace ? r.ncclInPlace : r.ncclOutOfPlace) : (inPlace ? r.inPlace : r.outOfPlace);
  }
};

const Curve kCurves[] = {{false, false, "#2b6cb0", ""}, {false, true, "#e67e22", ""},
                         {true, false, "#2f855a", "6,3"}, {true, true, "#c53030", "6,3"}};

void series(std::ostream& f, const Panel& p, const std::vector<Row>& rows, bool bw, const Curve& c) {
  f << "<polyline fill='none' stroke='" << c.color << "' stroke-width='2' stroke-dasharray='" << c.dash << "' points='";
  for (const auto& r : rows) {
    const Measure& m = c.of(r);
    f << p.px(std::max<double>(1, r.bytes)) << "," << p.py(bw ? m.busBw : m.timeUs) << " ";
  }
  f << "'/>\n";
}

}  // namespace

void writeSvg(const std::string& path, const std::vector<Row>& rows, Collective c, int nranks, const std::string& title) {
  std::ofstream f(path);
  if (!f) throw Error(ErrorCode::System, "cannot write '" + path + "'");
  double minX = 0, maxX = 1, maxBw = 1e-3, minT = 1e9, maxT = 1e-9;
  if (!rows.empty()) {
    minX = std::log2(std::max<double>(1, rows.front().bytes));
    maxX = std::max(minX + 1, std::log2(std::max<double>(1, rows.back().bytes)));
  }
  bool compared = !rows.empty() && rows.front().compared;
  for (const auto& r : rows)
    for (const Measure* m : {&r.outOfPlace, &r.inPlace, &r.ncclOutOfPlace, &r.ncclInPlace}) {
      if (m->timeUs <= 0) continue;  // NCCL's, when not compared
      maxBw = std::max(maxBw, m->busBw);
      minT = std::min(minT, std::max(m->timeUs, 1e-3));
      maxT = std::max(maxT, m->timeUs);
    }
  Panel bw{0, minX, maxX, 0, maxBw * 1.1, false};
  Panel tm{kW, minX, maxX, std::floor(std::log10(minT)), std::ceil(std::log10(std::max(maxT, minT * 10))), true};
  f << "<svg xmlns='http://www.w3.org/2000/svg' width='" << 2 * kW << "' height='" << kH + 40 << "' font-family='sans-serif'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='" << kW << "' y='20' text-anchor='middle' font-size='14'>" << title << " (" << collectiveName(c) << ", "
    << nranks << " ranks)</text>\n"
    << "<text x='" << kW << "' y='38' text-anchor='middle' font-size='11'>Plugboard: blue out-of-place, orange in-place"
    << (compared ? "; NCCL (dashed): green out-of-place, red in-place" : "") << "</text>\n";
  axes(f, bw, "bus bandwidth (GB/s)", rows);
  axes(f, tm, "time (us)", rows);
  for (const Curve& curve : kCurves) {
    if (curve.nccl && !compared) continue;
    series(f, bw, rows, true, curve);
    series(f, tm, rows, false, curve);
  }
  f << "</svg>\n";
}

}  // namespace plugboard::perf
