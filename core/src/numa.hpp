// Placement of the proxy threads: the NUMA node of a PCI device (a GPU)
// and the CPUs of that node, from Linux sysfs.
#pragma once

#include <string>
#include <vector>

namespace plugboard {

/// Parses a sysfs cpulist such as "0-3,8,10-11"; throws Error(Internal) on garbage.
std::vector<int> parseCpuList(const std::string& text);

/// NUMA node of the PCI device with this bus id ("0000:1B:00.0", any case),
/// or -1 when unknown (no sysfs entry, or the kernel reports -1).
int numaNodeOfPciDevice(const std::string& busId, const std::string& sysfsRoot = "/sys");

/// Binds the calling thread to the CPUs of NUMA node `node` that its
/// current affinity allows. Returns what was done ("node 1 (cpus 32-63)")
/// or why nothing was (unknown node, no allowed CPU there).
std::string bindThisThreadToNumaNode(int node, const std::string& sysfsRoot = "/sys");

}  // namespace plugboard
