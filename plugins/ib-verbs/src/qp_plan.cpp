#include "qp_plan.hpp"

#include <algorithm>
#include <cstring>

namespace plugboard::ibverbs {

QpStep initStep(const LocalPort& local) {
  QpStep s;
  s.attr.qp_state = IBV_QPS_INIT;
  s.attr.pkey_index = 0;
  s.attr.port_num = local.port;
  s.attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  s.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  return s;
}

QpStep rtrStep(const LocalPort& local, const wire::AddressBlob& peer, const wire::QpInfo& qp, const IbSettings& set) {
  QpStep s;
  s.attr.qp_state = IBV_QPS_RTR;
  s.attr.path_mtu = static_cast<ibv_mtu>(std::min({static_cast<int>(local.activeMtu), static_cast<int>(peer.mtu),
                                                   static_cast<int>(set.mtu)}));
  s.attr.dest_qp_num = qp.qpn;
  s.attr.rq_psn = qp.psn;
  s.attr.max_dest_rd_atomic = local.responderDepth;
  s.attr.min_rnr_timer = 12;
  ibv_ah_attr& ah = s.attr.ah_attr;
  ah.port_num = local.port;
  ah.sl = set.serviceLevel;
  if (local.linkLayer == IBV_LINK_LAYER_ETHERNET) {
    ah.is_global = 1;
    std::memcpy(ah.grh.dgid.raw, peer.gid.data(), peer.gid.size());
    ah.grh.sgid_index = static_cast<uint8_t>(local.gid.index);
    ah.grh.hop_limit = 255;
    ah.grh.traffic_class = set.trafficClass;
  } else {
    ah.is_global = 0;
    ah.dlid = peer.lid;
  }
  s.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
           IBV_QP_MIN_RNR_TIMER;
  return s;
}

uint8_t initiatorDepth(const LocalPort& local, const wire::AddressBlob& peer) {
  return std::max<uint8_t>(1, std::min(local.initiatorDepth, peer.responderDepth));
}

QpStep rtsStep(uint32_t localPsn, const IbSettings& set, uint8_t depth) {
  QpStep s;
  s.attr.qp_state = IBV_QPS_RTS;
  s.attr.timeout = set.timeout;
  s.attr.retry_cnt = set.retryCount;
  s.attr.rnr_retry = 7;  // 7: retry forever on receiver-not-ready (writes need no receives)
  s.attr.sq_psn = localPsn;
  s.attr.max_rd_atomic = depth;
  s.mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  return s;
}

}  // namespace plugboard::ibverbs
