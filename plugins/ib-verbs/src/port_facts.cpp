#include "port_facts.hpp"

#include "error.hpp"

namespace plugboard::ibverbs {
namespace {

/// The port as PortInfo, from facts that passed every check before the GID.
PortInfo portInfo(const PortFacts& f) {
  PortInfo p;
  p.device = f.device;
  p.port = f.port;
  p.linkLayer = f.attr.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  p.lid = f.attr.lid;
  p.activeMtu = f.attr.active_mtu;
  p.gbps = portGbps(f.attr.active_speed, f.attr.active_width);
  if (f.attr.max_msg_sz > 0 && f.attr.max_msg_sz < p.maxMessageBytes) p.maxMessageBytes = f.attr.max_msg_sz;
  p.initiatorDepth = rdAtomicDepth(f.deviceAttr.max_qp_init_rd_atom);
  p.responderDepth = rdAtomicDepth(f.deviceAttr.max_qp_rd_atom);
  p.pciPlace = f.pciPlace;
  return p;
}

/// Why the port is skipped, or "" with *out filled.
std::string whySkipped(const PortFacts& f, const IbSettings& s, PortInfo* out) {
  if (!s.hca.matches(f.device, f.port)) return "not selected by ib-verbs.hca (" + s.hca.describe() + ")";
  if (!f.portError.empty()) return f.portError;
  if (f.attr.state != IBV_PORT_ACTIVE) return "state " + portStateName(f.attr.state);
  if (f.deviceAttr.atomic_cap == IBV_ATOMIC_NONE)
    return "the device has no RDMA atomics (atomic_cap NONE), which signals need";
  if (!f.gidError.empty()) return f.gidError;
  PortInfo p = portInfo(f);
  try {
    p.gid = chooseGid(f.gids, p.linkLayer, s.gidIndex, p.name());
  } catch (const Error& e) {
    return e.what();
  }
  *out = p;
  return "";
}

}  // namespace

void judgePort(const PortFacts& facts, const IbSettings& settings, Discovery& d) {
  PortInfo p;
  const std::string why = whySkipped(facts, settings, &p);
  if (why.empty()) d.usable.push_back(p);
  else d.skipped.push_back(facts.device + " port " + std::to_string(facts.port) + ": " + why);
}

}  // namespace plugboard::ibverbs
