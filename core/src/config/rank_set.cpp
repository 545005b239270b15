#include <cstdlib>

#include "plugboard/config.hpp"
#include "plugboard/error.hpp"

namespace plugboard {
namespace {

int parseRank(const std::string& text, const std::string& where, const std::string& whole) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0 || v > 1000000000)
    throw Error(ErrorCode::Config, where + ": bad rank range '" + whole + "': '" + text +
                                       "' is not a rank number (expected e.g. \"0-7,12\")");
  return static_cast<int>(v);
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace

RankSet RankSet::parse(const std::string& text, const std::string& where) {
  RankSet set;
  set.text_ = text;
  if (trim(text).empty()) throw Error(ErrorCode::Config, where + ": empty rank range");
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string item = trim(text.substr(start, comma - start));
    size_t dash = item.find('-');
    int lo = parseRank(trim(item.substr(0, dash)), where, text);
    int hi = dash == std::string::npos ? lo : parseRank(trim(item.substr(dash + 1)), where, text);
    if (hi < lo)
      throw Error(ErrorCode::Config, where + ": bad rank range '" + text + "': " + item + " ends before it starts");
    set.ranges_.emplace_back(lo, hi);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return set;
}

bool RankSet::contains(int rank) const {
  for (const auto& r : ranges_)
    if (rank >= r.first && rank <= r.second) return true;
  return false;
}

std::string PeerMatch::describe() const {
  switch (kind) {
    case Kind::Any: return "any";
    case Kind::SameHost: return "same-host";
    case Kind::DifferentHost: return "different-host";
    case Kind::Ranks: return "{from: " + from.text() + ", to: " + to.text() + "}";
    case Kind::Hosts: {
      std::string s = "{hosts: [";
      for (size_t i = 0; i < hosts.size(); ++i) s += (i ? ", " : "") + hosts[i];
      return s + "]}";
    }
  }
  return "?";
}

}  // namespace plugboard
