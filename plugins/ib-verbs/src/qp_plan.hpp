// The attributes and masks of a reliable-connected queue pair's transitions
// RESET -> INIT -> RTR -> RTS, computed from both ends' addresses and the
// settings, for ibv_modify_qp. Built without a device, so tested in CI.
#pragma once

#include <infiniband/verbs.h>

#include "gid.hpp"
#include "settings.hpp"
#include "wire.hpp"

namespace plugboard::ibverbs {

/// One ibv_modify_qp call: the attributes and which of them count.
struct QpStep {
  ibv_qp_attr attr{};
  int mask = 0;
};

/// This end of a connection: port, MTU and GID the QPs use.
struct LocalPort {
  uint8_t port = 1;
  ibv_mtu activeMtu = IBV_MTU_4096;
  int linkLayer = IBV_LINK_LAYER_INFINIBAND;
  GidChoice gid;
  uint8_t initiatorDepth = 1;  ///< PortInfo::initiatorDepth
  uint8_t responderDepth = 1;  ///< PortInfo::responderDepth, announced in the address blob
};

/// RESET -> INIT: port, pkey 0, remote write and atomic access.
QpStep initStep(const LocalPort& local);
/// INIT -> RTR toward the peer's queue pair qp: path MTU = the smallest of
/// ours, the peer's and ib-verbs.mtu; address by LID on InfiniBand, by GID
/// (GRH with traffic class) on RoCE; this end takes local.responderDepth
/// reads and atomics in flight.
QpStep rtrStep(const LocalPort& local, const wire::AddressBlob& peer, const wire::QpInfo& qp, const IbSettings& s);
/// RTR -> RTS with our starting PSN, ack timeout and retry counts, and
/// at most `depth` RDMA reads and atomics outstanding (initiatorDepth()).
QpStep rtsStep(uint32_t localPsn, const IbSettings& s, uint8_t depth);
/// Reads and atomics a queue pair may keep outstanding toward the peer:
/// the smaller of what this device initiates and the peer takes in flight.
uint8_t initiatorDepth(const LocalPort& local, const wire::AddressBlob& peer);

}  // namespace plugboard::ibverbs
