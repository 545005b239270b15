// Where a PCI device sits, for choosing the NIC nearest a GPU (nic_affinity.hpp).
#pragma once

#include <string>

namespace plugboard::ibverbs {

/// A device's sysfs path ("/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.0") and NUMA node.
struct PciPlace {
  std::string path;   ///< "" when unknown
  int numaNode = -1;  ///< -1 when unknown
};

}  // namespace plugboard::ibverbs
