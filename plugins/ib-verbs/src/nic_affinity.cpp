#include "nic_affinity.hpp"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

namespace plugboard::ibverbs {
namespace {

/// The components of a path, empty ones dropped.
std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream in(path);
  for (std::string part; std::getline(in, part, '/');)
    if (!part.empty()) out.push_back(part);
  return out;
}

PciPlace placeOf(const std::string& link) {
  PciPlace place;
  std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(link.c_str(), nullptr), &std::free);
  if (!resolved) return place;
  place.path = resolved.get();
  std::ifstream numa(place.path + "/numa_node");
  if (!(numa >> place.numaNode) || place.numaNode < 0) place.numaNode = -1;
  return place;
}

}  // namespace

int pciDistance(const PciPlace& a, const PciPlace& b) {
  if (a.path.empty() || b.path.empty()) return -1;
  const std::vector<std::string> x = components(a.path), y = components(b.path);
  size_t common = 0;
  while (common < x.size() && common < y.size() && x[common] == y[common]) ++common;
  // "sys", "devices" and the root complex ("pci0000:00"): below different
  // root complexes no bridge is shared.
  if (common >= 3) return static_cast<int>((x.size() - common) + (y.size() - common));
  const bool otherSocket = a.numaNode >= 0 && b.numaNode >= 0 && a.numaNode != b.numaNode;
  return static_cast<int>(x.size() + y.size()) + (otherSocket ? 64 : 0);
}

PortPick pickPort(const std::vector<PortInfo>& ports, const PciPlace& gpu) {
  PortPick pick;
  if (gpu.path.empty()) {
    pick.reason = "the first usable port (the GPU's place in the PCI tree is unknown)";
    return pick;
  }
  int best = INT_MAX;
  for (size_t i = 0; i < ports.size(); ++i) {
    const int d = pciDistance(ports[i].pciPlace, gpu);
    if (d >= 0 && d < best) {
      best = d;
      pick.index = i;
    }
  }
  pick.reason = best == INT_MAX ? "the first usable port (no port's place in the PCI tree is known)"
                                : "nearest the GPU (" + std::to_string(best) + " PCI hops)";
  return pick;
}

PciPlace rdmaDevicePlace(const std::string& device) { return placeOf("/sys/class/infiniband/" + device + "/device"); }

PciPlace pciDevicePlace(const std::string& busId) {
  if (busId.empty() || busId.find('/') != std::string::npos) return {};
  return placeOf("/sys/bus/pci/devices/" + busId);
}

}  // namespace plugboard::ibverbs
