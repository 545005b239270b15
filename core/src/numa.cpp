#include "numa.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "plugboard/error.hpp"

namespace plugboard {
namespace {

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

int parseCpu(const std::string& s, const std::string& whole) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); }) || s.size() > 6)
    throw Error(ErrorCode::Internal, "malformed cpulist '" + whole + "'");
  return std::stoi(s);
}

}  // namespace

std::vector<int> parseCpuList(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    part.erase(std::remove_if(part.begin(), part.end(), [](unsigned char c) { return std::isspace(c); }), part.end());
    if (part.empty()) continue;
    const size_t dash = part.find('-');
    const int first = parseCpu(part.substr(0, dash), text);
    const int last = dash == std::string::npos ? first : parseCpu(part.substr(dash + 1), text);
    if (last < first) throw Error(ErrorCode::Internal, "malformed cpulist '" + text + "'");
    for (int c = first; c <= last; ++c) cpus.push_back(c);
  }
  return cpus;
}

int numaNodeOfPciDevice(const std::string& busId, const std::string& sysfsRoot) {
  std::string id = busId;
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::string line = readFirstLine(sysfsRoot + "/bus/pci/devices/" + id + "/numa_node");
  try {
    return line.empty() ? -1 : std::stoi(line);
  } catch (const std::exception&) {
    return -1;
  }
}

std::string bindThisThreadToNumaNode(int node, const std::string& sysfsRoot) {
  if (node < 0) return "not bound (NUMA node unknown)";
  const std::string list = readFirstLine(sysfsRoot + "/devices/system/node/node" + std::to_string(node) + "/cpulist");
  std::vector<int> cpus = list.empty() ? std::vector<int>{} : parseCpuList(list);
  // Stay inside what the launcher allowed (mpirun --bind-to, taskset).
  cpu_set_t allowed, set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed) != 0) return "not bound (affinity unreadable)";
  for (int c : cpus)
    if (c < CPU_SETSIZE && CPU_ISSET(c, &allowed)) CPU_SET(c, &set);
  if (CPU_COUNT(&set) == 0)
    return "not bound (none of node " + std::to_string(node) + "'s cpus " + list + " is in the process's affinity)";
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
    return "not bound (pthread_setaffinity_np refused node " + std::to_string(node) + ")";
  return "node " + std::to_string(node) + " (cpus " + list + ")";
}

}  // namespace plugboard
