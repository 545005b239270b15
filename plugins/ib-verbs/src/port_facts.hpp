// What the verbs calls said about one port, and discovery's verdict on it:
// usable, or skipped with the reason. The verdict needs no device, so it is
// tested on made-up ports; device.cpp fills the facts in from the HCA.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "device.hpp"
#include "gid.hpp"
#include "pci_place.hpp"
#include "settings.hpp"

namespace plugboard::ibverbs {

/// One port as ibv_query_device, ibv_query_port and ibv_query_gid_table
/// described it.
struct PortFacts {
  std::string device;            ///< "mlx5_0"
  uint8_t port = 1;              ///< Counts from 1.
  ibv_device_attr deviceAttr{};  ///< The device's (atomic_cap, max_qp_*_rd_atom)
  std::string portError;         ///< Why ibv_query_port failed; "" when attr holds its answer
  ibv_port_attr attr{};
  std::string gidError;          ///< Why the GID table could not be read; "" when gids holds it
  std::vector<GidRow> gids;      ///< This port's rows only
  PciPlace pciPlace;
};

/// Adds the port to d.usable, or "<device> port <n>: <why>" to d.skipped.
/// In this order, the first that applies is the reason: not selected by
/// ib-verbs.hca, ibv_query_port failed, not ACTIVE, no RDMA atomics on the
/// device (signals are atomic adds), the GID table unreadable, no usable GID.
void judgePort(const PortFacts& facts, const IbSettings& settings, Discovery& d);

}  // namespace plugboard::ibverbs
