// Which RDMA port a rank uses when several are usable: the one nearest its
// GPU in the PCI tree, as NCCL pairs each GPU with its nearest NIC. A
// device's place is its sysfs path ("/sys/devices/pci0000:00/0000:00:01.0/
// 0000:3b:00.0"); the distance of two devices is the hops up from one to
// the deepest bridge both sit below, then down to the other. Devices under
// different root complexes share no bridge: farther than any that do, and
// farther still on different NUMA nodes (another socket, NCCL's "SYS").
// The arithmetic is device-free, so tested in CI (IbNicAffinity.*).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "device.hpp"
#include "pci_place.hpp"

namespace plugboard::ibverbs {

/// How far apart two devices are: PCI hops through their deepest common
/// bridge; under different root complexes the sum of both depths, plus 64
/// when both NUMA nodes are known and differ; -1 when either path is unknown.
int pciDistance(const PciPlace& a, const PciPlace& b);

/// The port a rank whose GPU sits at gpu uses, and why.
struct PortPick {
  size_t index = 0;    ///< Into the usable ports.
  std::string reason;  ///< "nearest the GPU (2 PCI hops)", "the first usable port (...)"
};

/// The usable port nearest gpu; among equally near ports (two ports of
/// one HCA) the first. Ports whose place is unknown count as farthest.
/// Without the GPU's place (no CUDA device, a core before ABI 1.5) the first.
PortPick pickPort(const std::vector<PortInfo>& ports, const PciPlace& gpu);

/// Where an RDMA device's PCI function sits (the realpath of
/// /sys/class/infiniband/<device>/device); an empty path for a software
/// device such as rxe.
PciPlace rdmaDevicePlace(const std::string& device);

/// Where PCI function busId ("0000:3b:00.0") sits; an empty path when absent.
PciPlace pciDevicePlace(const std::string& busId);

}  // namespace plugboard::ibverbs
