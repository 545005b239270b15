#include "provider.hpp"

#include <dirent.h>

#include <algorithm>
#include <utility>

#include "error.hpp"

namespace plugboard::libfabric {

const std::vector<std::string> kDefaultProviders = {"efa", "verbs;ofi_rxm", "tcp;ofi_rxm", "tcp", "sockets"};

namespace {

/// text without leading and trailing blanks.
std::string trim(const std::string& text) {
  size_t b = text.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = text.find_last_not_of(" \t");
  return text.substr(b, e - b + 1);
}

/// Comma-separated items of text, trimmed; empty items kept.
std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    out.push_back(trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

const char* provName(const fi_info* i) {
  return i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?";
}
const char* domainName(const fi_info* i) {
  return i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "?";
}

}  // namespace

ProviderSpec ProviderSpec::parse(const std::string& text) {
  ProviderSpec spec;
  std::string body = trim(text);
  if (body.empty()) return spec;
  if (body[0] == '^') {
    spec.exclude = true;
    body = body.substr(1);
  }
  for (auto& name : splitList(body)) {
    OFI_CHECK(!name.empty() && name != "=", PB_ERR_INVALID,
              "libfabric.provider = '" + text + "' has an empty provider name");
    spec.names.push_back(name);
  }
  return spec;
}

bool ProviderSpec::entryMatches(const std::string& entry, const std::string& provider, bool exactOnly) {
  bool exact = !entry.empty() && entry[0] == '=';
  std::string name = exact ? entry.substr(1) : entry;
  if (provider == name) return true;
  if (exact || exactOnly || name.find(';') != std::string::npos) return false;
  return provider.compare(0, provider.find(';'), name) == 0 && provider.find(';') != std::string::npos;
}

bool ifaceSelects(const std::string& iface, const std::string& domain) {
  std::string body = trim(iface);
  if (body.empty()) return true;
  bool exclude = body[0] == '^';
  if (exclude) body = body.substr(1);
  bool listed = false;
  for (auto& item : splitList(body)) {
    if (item.empty()) continue;
    bool exact = item[0] == '=';
    std::string name = exact ? item.substr(1) : item;
    if (exact ? domain == name : domain.compare(0, name.size(), name) == 0) listed = true;
  }
  return listed != exclude;
}

bool ProviderChoice::hostLocal() const {
  return core() == "shm" || domain == "lo" || fabric.rfind("127.", 0) == 0 || fabric.rfind("::1/", 0) == 0;
}

int ProviderChoice::cost() const {
  std::string c = core();
  // RDMA-class fabrics beat every TCP path; tcp loses to the ethernet
  // plugin (cost 100), which moves the same bytes with less machinery.
  if (c == "efa" || c == "verbs" || c == "psm2" || c == "psm3" || c == "opx" || c == "cxi") return 50;
  if (c == "shm") return 60;
  if (c == "tcp" || c == "net") return 120;
  return 150;  // sockets, udp;ofi_rxd and anything unknown
}

double ProviderChoice::bandwidthGbps() const {
  std::string c = core();
  if (c == "efa" || c == "verbs" || c == "psm2" || c == "psm3" || c == "opx" || c == "cxi") return 12.5;
  if (c == "shm") return 10.0;
  return 1.25;  // a 10 GbE-class link
}

double ProviderChoice::latencyUs() const {
  std::string c = core();
  if (c == "efa") return 15.0;
  if (c == "verbs" || c == "psm2" || c == "psm3" || c == "opx" || c == "cxi") return 3.0;
  if (c == "shm") return 1.0;
  return 30.0;  // kernel TCP plus a delivery acknowledgement
}

std::string describeOffer(const fi_info* list) {
  std::vector<std::pair<std::string, std::vector<std::string>>> offer;
  for (const fi_info* i = list; i; i = i->next) {
    auto it = std::find_if(offer.begin(), offer.end(), [&](const auto& p) { return p.first == provName(i); });
    if (it == offer.end()) it = offer.insert(offer.end(), {provName(i), {}});
    if (std::find(it->second.begin(), it->second.end(), domainName(i)) == it->second.end())
      it->second.push_back(domainName(i));
  }
  std::string out;
  for (const auto& [prov, domains] : offer) {
    out += (out.empty() ? "" : ", ") + prov + " (";
    for (size_t d = 0; d < domains.size(); ++d) out += (d ? ", " : "") + domains[d];
    out += ")";
  }
  return out.empty() ? "nothing" : out;
}

const fi_info* chooseInfo(const fi_info* list, const std::string& provider, const std::string& iface,
                          std::string* why) {
  ProviderSpec spec = ProviderSpec::parse(provider);
  auto usable = [&](const fi_info* i) { return ifaceSelects(iface, domainName(i)); };
  auto excluded = [&](const std::string& prov) {
    if (!spec.exclude) return false;
    for (const auto& n : spec.names)
      if (ProviderSpec::entryMatches(n, prov, false)) return true;
    return false;
  };
  // First info whose provider matches entry (exact pass first, then the
  // layered-provider rule), selected by iface and not excluded.
  auto find = [&](const std::string& entry, bool exactOnly) -> const fi_info* {
    for (bool exactPass : {true, false}) {
      if (!exactPass && exactOnly) break;
      for (const fi_info* i = list; i; i = i->next)
        if (usable(i) && !excluded(provName(i)) && ProviderSpec::entryMatches(entry, provName(i), exactPass))
          return i;
    }
    return nullptr;
  };
  if (!spec.exclude && !spec.names.empty()) {
    for (const auto& n : spec.names)
      if (const fi_info* i = find(n, false)) return i;
  } else {
    for (const auto& n : kDefaultProviders)
      if (const fi_info* i = find(n, true)) return i;
    if (spec.exclude)  // "all but these": anything else, in fi_getinfo's order
      for (const fi_info* i = list; i; i = i->next)
        if (usable(i) && !excluded(provName(i))) return i;
  }
  std::string asked = provider.empty() ? "the default order (efa, verbs;ofi_rxm, tcp;ofi_rxm, tcp, sockets)"
                                       : "provider '" + provider + "'";
  *why = "no provider matches " + asked + (iface.empty() ? "" : " on iface '" + iface + "'") +
         "; fi_getinfo offers RDM endpoints with RMA writes from: " + describeOffer(list);
  return nullptr;
}

std::string fabricDevice(const std::string& root) {
  // (directory, name prefix): any entry of the first two, hfi1_* in /dev.
  const std::pair<const char*, const char*> places[] = {
      {"/sys/class/infiniband", ""}, {"/sys/class/cxi", ""}, {"/dev", "hfi1_"}};
  for (const auto& [dir, prefix] : places) {
    const std::string path = root + dir;
    DIR* d = opendir(path.c_str());
    if (!d) continue;
    std::string found;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != ".." && name.rfind(prefix, 0) == 0) {
        found = path + "/" + name;
        break;
      }
    }
    closedir(d);
    if (!found.empty()) return found;
  }
  return "";
}

}  // namespace plugboard::libfabric
