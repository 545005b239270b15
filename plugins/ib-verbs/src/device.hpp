// Which RDMA port the transport uses: every device ibv_get_device_list
// finds, every port of it, kept when it is active, matches ib-verbs.hca,
// has a usable GID and RDMA atomics (signals are atomic adds); the rest are
// listed with the reason they were skipped, for plugboard-info and errors.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <vector>

#include "gid.hpp"
#include "pci_place.hpp"
#include "settings.hpp"

namespace plugboard::ibverbs {

/// One usable port, as discovery found it.
struct PortInfo {
  std::string device;  ///< "mlx5_0"
  uint8_t port = 1;
  int linkLayer = IBV_LINK_LAYER_INFINIBAND;
  uint16_t lid = 0;
  ibv_mtu activeMtu = IBV_MTU_4096;
  double gbps = 0;  ///< Link speed (lanes x lane rate), 0 when unknown.
  uint64_t maxMessageBytes = 1ull << 30;  ///< The port's max_msg_sz (at most 1 GiB): a work request's limit.
  uint8_t initiatorDepth = 1;  ///< RDMA reads and atomics a queue pair may have outstanding (max_qp_init_rd_atom, capped)
  uint8_t responderDepth = 1;  ///< ... and may take in flight from its peer (max_qp_rd_atom, capped)
  GidChoice gid;
  PciPlace pciPlace;  ///< Where the device sits in the PCI tree (no path for a software device)

  /// "mlx5_0 port 1"
  std::string name() const;
  /// "mlx5_0 port 1: RoCE, 100 Gb/s, MTU 4096, GID 3 ::ffff:10.0.0.1 (RoCE v2, IPv4-mapped (first such))"
  std::string describe() const;
};

/// What discovery found.
struct Discovery {
  std::vector<PortInfo> usable;      ///< In device order, then port order.
  std::vector<std::string> skipped;  ///< "mlx5_1 port 1: state DOWN", one line each.
  /// Why nothing is usable: the skipped lines, or that there is no device.
  std::string whyNone() const;
};

/// Enumerates devices and ports with the settings' HCA filter and GID index.
Discovery discoverPorts(const IbSettings& settings);

/// Outstanding RDMA reads and atomics per queue pair asked of a device
/// that allows `deviceMax` (its max_qp_init_rd_atom or max_qp_rd_atom):
/// at most 16 (mlx5's limit), at least 1.
uint8_t rdAtomicDepth(int deviceMax);

/// Link speed in Gb/s from ibv_port_attr's active_speed and active_width
/// codes (0 for codes it does not know).
double portGbps(uint8_t activeSpeed, uint8_t activeWidth);

/// "InfiniBand", "RoCE" or "unknown link layer N".
std::string linkLayerName(int linkLayer);

/// "ACTIVE", "DOWN", "INIT", ... from ibv_port_state_str.
std::string portStateName(ibv_port_state state);

/// Bytes of an ibv_mtu code (IBV_MTU_1024 -> 1024).
int mtuBytes(ibv_mtu mtu);

}  // namespace plugboard::ibverbs
