#include "gid.hpp"

#include <cstdio>

#include "error.hpp"

namespace plugboard::ibverbs {
namespace {

bool isZero(const std::array<uint8_t, 16>& g) {
  for (uint8_t b : g)
    if (b) return false;
  return true;
}

/// ::ffff:a.b.c.d
bool isIpv4Mapped(const std::array<uint8_t, 16>& g) {
  for (int i = 0; i < 10; ++i)
    if (g[i]) return false;
  return g[10] == 0xff && g[11] == 0xff;
}

/// fe80::/10
bool isLinkLocal(const std::array<uint8_t, 16>& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

const GidRow* firstWhere(const std::vector<GidRow>& table, uint32_t type, bool (*ok)(const std::array<uint8_t, 16>&)) {
  for (const GidRow& r : table)
    if (r.type == type && !isZero(r.gid) && ok(r.gid)) return &r;
  return nullptr;
}

GidChoice choice(const GidRow& r, const std::string& reason) { return GidChoice{r.index, r.gid, reason}; }

std::string tableText(const std::vector<GidRow>& table) {
  std::string out;
  for (const GidRow& r : table) {
    if (isZero(r.gid)) continue;
    out += (out.empty() ? "" : "; ") + std::to_string(r.index) + ": " + gidTypeName(r.type) + " " + formatGid(r.gid);
  }
  return out.empty() ? "no non-empty GID" : out;
}

}  // namespace

const char* gidTypeName(uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    default: return "IB";
  }
}

std::string formatGid(const std::array<uint8_t, 16>& g) {
  char buf[48];
  if (isIpv4Mapped(g)) {
    std::snprintf(buf, sizeof buf, "::ffff:%u.%u.%u.%u", g[12], g[13], g[14], g[15]);
    return buf;
  }
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(buf, sizeof buf, "%s%02x%02x", i ? ":" : "", g[i], g[i + 1]);
    out += buf;
  }
  return out;
}

GidChoice chooseGid(const std::vector<GidRow>& table, int linkLayer, int configuredIndex, const std::string& port) {
  if (configuredIndex >= 0) {
    for (const GidRow& r : table)
      if (r.index == static_cast<uint32_t>(configuredIndex)) {
        IBV_CHECK(!isZero(r.gid), PB_ERR_INVALID,
                  "ib-verbs: " + port + ": ib-verbs.gid_index " + std::to_string(configuredIndex) +
                      " is empty (the table has " + tableText(table) + ")");
        return choice(r, "set by ib-verbs.gid_index");
      }
    throw Error(PB_ERR_INVALID, "ib-verbs: " + port + ": ib-verbs.gid_index " + std::to_string(configuredIndex) +
                                   " is not in the GID table (" + tableText(table) + ")");
  }
  if (linkLayer != IBV_LINK_LAYER_ETHERNET) {
    GidRow zero;
    for (const GidRow& r : table)
      if (r.index == 0) zero = r;
    return choice(zero, "InfiniBand: routed by LID, GID 0");
  }
  if (const GidRow* r = firstWhere(table, IBV_GID_TYPE_ROCE_V2, isIpv4Mapped))
    return choice(*r, "RoCE v2, IPv4-mapped (the first such)");
  if (const GidRow* r = firstWhere(table, IBV_GID_TYPE_ROCE_V2, [](const std::array<uint8_t, 16>& g) {
        return !isLinkLocal(g);
      }))
    return choice(*r, "RoCE v2, global IPv6 (no IPv4-mapped GID)");
  if (const GidRow* r = firstWhere(table, IBV_GID_TYPE_ROCE_V1, [](const std::array<uint8_t, 16>&) { return true; }))
    return choice(*r, "RoCE v1 (no RoCE v2 GID)");
  throw Error(PB_ERR_UNSUPPORTED, "ib-verbs: " + port + ": RoCE port without a usable GID (" + tableText(table) +
                                      "); give the port an IP address or set ib-verbs.gid_index");
}

}  // namespace plugboard::ibverbs
