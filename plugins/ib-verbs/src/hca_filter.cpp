#include "hca_filter.hpp"

#include <cctype>

#include "error.hpp"

namespace plugboard::ibverbs {
namespace {

std::string trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

int parsePort(const std::string& text, const std::string& entry, const std::string& where) {
  bool digits = !text.empty() && text.size() <= 3;
  for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  const int port = digits ? std::stoi(text) : 0;
  IBV_CHECK(port >= 1 && port <= 255, PB_ERR_INVALID,
            where + ": '" + entry + "' names port '" + text + "'; a port is a number from 1 to 255");
  return port;
}

}  // namespace

HcaFilter HcaFilter::parse(const std::string& spec, const std::string& where) {
  HcaFilter f;
  std::string rest = trimmed(spec);
  if (!rest.empty() && rest[0] == '^') {
    f.exclude_ = true;
    rest = rest.substr(1);
  }
  if (!rest.empty() && rest[0] == '=') {
    f.exact_ = true;
    rest = rest.substr(1);
  }
  if (rest.empty()) {
    IBV_CHECK(!f.exclude_ && !f.exact_, PB_ERR_INVALID, where + ": '" + spec + "' names no device");
    return f;
  }
  size_t start = 0;
  while (start <= rest.size()) {
    const size_t comma = rest.find(',', start);
    const std::string entry = trimmed(rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    IBV_CHECK(!entry.empty(), PB_ERR_INVALID, where + ": '" + spec + "' has an empty entry");
    Entry e;
    const size_t colon = entry.find(':');
    e.name = trimmed(entry.substr(0, colon));
    IBV_CHECK(!e.name.empty(), PB_ERR_INVALID, where + ": '" + entry + "' has no device name");
    if (colon != std::string::npos) e.port = parsePort(trimmed(entry.substr(colon + 1)), entry, where);
    f.entries_.push_back(e);
    IBV_CHECK(f.entries_.size() <= kMaxEntries, PB_ERR_INVALID,
              where + ": more than " + std::to_string(kMaxEntries) + " entries in '" + spec + "'");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return f;
}

bool HcaFilter::listed(const std::string& device, int port) const {
  for (const Entry& e : entries_) {
    const bool nameMatches = exact_ ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    if (nameMatches && (e.port == -1 || e.port == port)) return true;
  }
  return false;
}

bool HcaFilter::matches(const std::string& device, int port) const {
  if (entries_.empty()) return true;
  return listed(device, port) != exclude_;
}

std::string HcaFilter::describe() const {
  if (entries_.empty()) return "all devices and ports";
  std::string out = exclude_ ? "all but " : "only ";
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (i) out += ", ";
    out += entries_[i].name + (exact_ ? "" : "*");
    if (entries_[i].port != -1) out += " port " + std::to_string(entries_[i].port);
  }
  return out;
}

}  // namespace plugboard::ibverbs
