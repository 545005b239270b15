#include "device.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "error.hpp"
#include "nic_affinity.hpp"
#include "port_facts.hpp"
#include "verbs.hpp"

namespace plugboard::ibverbs {
namespace {

/// The port's GID table from ibv_query_gid_table (this port's rows only).
std::vector<GidRow> gidTable(ibv_context* ctx, uint8_t port, int tableLength, int ports) {
  // The table holds every port's GIDs: room for all of them.
  std::vector<ibv_gid_entry> entries(static_cast<size_t>(tableLength > 0 ? tableLength : 1) * ports);
  const ssize_t n = ibv_query_gid_table(ctx, entries.data(), entries.size(), 0);
  if (n < 0)
    throw Error(PB_ERR_SYSTEM, "ibv_query_gid_table failed: " + std::string(std::strerror(static_cast<int>(-n))));
  std::vector<GidRow> rows;
  for (ssize_t i = 0; i < n; ++i) {
    if (entries[i].port_num != port) continue;
    GidRow r;
    r.index = entries[i].gid_index;
    std::memcpy(r.gid.data(), entries[i].gid.raw, r.gid.size());
    r.type = entries[i].gid_type;
    rows.push_back(r);
  }
  return rows;
}

/// What the verbs calls say about one port of an open device.
PortFacts queryPort(ibv_context* ctx, const std::string& device, uint8_t port, const ibv_device_attr& dev) {
  PortFacts f;
  f.device = device;
  f.port = port;
  f.deviceAttr = dev;
  f.pciPlace = rdmaDevicePlace(device);
  if (int rc = ibv_query_port(ctx, port, &f.attr); rc != 0) {
    f.portError = std::string("ibv_query_port failed: ") + std::strerror(rc > 0 ? rc : errno);
    return f;
  }
  try {
    f.gids = gidTable(ctx, port, f.attr.gid_tbl_len, dev.phys_port_cnt);
  } catch (const Error& e) {
    f.gidError = e.what();
  }
  return f;
}

/// Adds every port of one device to d.
void examineDevice(ibv_device* dev, const IbSettings& s, Discovery& d) {
  const std::string name = ibv_get_device_name(dev) ? ibv_get_device_name(dev) : "?";
  DeviceContext ctx(ibv_open_device(dev));
  if (!ctx) {
    d.skipped.push_back(name + ": ibv_open_device failed: " + std::strerror(errno));
    return;
  }
  ibv_device_attr attr{};
  if (int rc = ibv_query_device(ctx.get(), &attr); rc != 0) {
    d.skipped.push_back(name + ": ibv_query_device failed: " + std::strerror(rc > 0 ? rc : errno));
    return;
  }
  for (uint8_t port = 1; port <= attr.phys_port_cnt; ++port) judgePort(queryPort(ctx.get(), name, port, attr), s, d);
}

}  // namespace

uint8_t rdAtomicDepth(int deviceMax) { return static_cast<uint8_t>(std::clamp(deviceMax, 1, 16)); }

std::string PortInfo::name() const { return device + " port " + std::to_string(port); }

std::string PortInfo::describe() const {
  std::ostringstream o;
  o << name() << ": " << linkLayerName(linkLayer) << ", ";
  if (gbps > 0) o << gbps << " Gb/s, ";
  o << "MTU " << mtuBytes(activeMtu);
  if (linkLayer == IBV_LINK_LAYER_INFINIBAND) o << ", LID " << lid;
  o << ", GID " << gid.index << " " << formatGid(gid.gid) << " (" << gid.reason << ")";
  return o.str();
}

std::string Discovery::whyNone() const {
  if (skipped.empty()) return "ibv_get_device_list found no RDMA device on this host";
  std::string out = "no usable RDMA port:";
  for (const auto& s : skipped) out += " [" + s + "]";
  return out;
}

Discovery discoverPorts(const IbSettings& s) {
  Discovery d;
  int n = 0;
  errno = 0;
  DeviceList list(ibv_get_device_list(&n));
  if (!list) {
    if (errno && errno != ENOSYS)
      d.skipped.push_back(std::string("ibv_get_device_list failed: ") + std::strerror(errno));
    return d;
  }
  for (int i = 0; i < n; ++i) examineDevice(list.get()[i], s, d);
  return d;
}

double portGbps(uint8_t activeSpeed, uint8_t activeWidth) {
  double lane = 0;
  switch (activeSpeed) {  // Gb/s per lane (InfiniBand's signalling codes, data rates after encoding)
    case 1: lane = 2.5; break;     // SDR
    case 2: lane = 5.0; break;     // DDR
    case 4: lane = 10.0; break;    // QDR
    case 8: lane = 10.3125; break; // FDR10
    case 16: lane = 14.0625; break;// FDR
    case 32: lane = 25.78125; break;  // EDR
    case 64: lane = 50.0; break;   // HDR
    case 128: lane = 100.0; break; // NDR
    default: return 0;
  }
  int lanes = 0;
  switch (activeWidth) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0;
  }
  return lane * lanes;
}

std::string linkLayerName(int linkLayer) {
  switch (linkLayer) {
    case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET: return "RoCE";
    default: return "unknown link layer " + std::to_string(linkLayer);
  }
}

std::string portStateName(ibv_port_state state) {
  const char* s = ibv_port_state_str(state);
  std::string out = s ? s : "unknown";
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (out.rfind("PORT_", 0) == 0) out = out.substr(5);
  return out;
}

int mtuBytes(ibv_mtu mtu) {
  const int code = static_cast<int>(mtu);
  return code >= 1 && code <= 5 ? 128 << code : 0;
}

}  // namespace plugboard::ibverbs
