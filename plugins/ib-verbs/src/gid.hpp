// Which GID a port uses. InfiniBand ports route by LID and use GID 0. RoCE
// ports need a GID: the ib-verbs.gid_index setting when given, else (as
// NCCL does by default) the first RoCE v2 GID holding an IPv4-mapped
// address, else the first RoCE v2 global IPv6 GID, else the first RoCE v1
// GID. Works on a table as ibv_query_gid_table returns it, so it is tested
// without a device.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace plugboard::ibverbs {

/// One row of a port's GID table.
struct GidRow {
  uint32_t index = 0;
  std::array<uint8_t, 16> gid{};
  uint32_t type = IBV_GID_TYPE_IB;  ///< IBV_GID_TYPE_IB, _ROCE_V1 or _ROCE_V2.
};

/// The GID chosen for a port, and why.
struct GidChoice {
  uint32_t index = 0;
  std::array<uint8_t, 16> gid{};
  std::string reason;  ///< "RoCE v2, IPv4-mapped (first such)", "set by ib-verbs.gid_index", ...
};

/// Chooses a GID. linkLayer is IBV_LINK_LAYER_INFINIBAND or _ETHERNET;
/// configuredIndex < 0 means automatic; port names the port for errors
/// ("mlx5_0 port 1"). Throws Error(PB_ERR_INVALID) when the configured
/// index is missing or empty, Error(PB_ERR_UNSUPPORTED) when a RoCE port
/// has no usable GID.
GidChoice chooseGid(const std::vector<GidRow>& table, int linkLayer, int configuredIndex, const std::string& port);

/// "::ffff:192.0.2.1" for an IPv4-mapped GID, else eight hex groups.
std::string formatGid(const std::array<uint8_t, 16>& gid);

/// "RoCE v2", "RoCE v1" or "IB".
const char* gidTypeName(uint32_t type);

}  // namespace plugboard::ibverbs
