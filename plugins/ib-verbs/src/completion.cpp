#include "completion.hpp"

namespace plugboard::ibverbs {
namespace {

const char* hintFor(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_RETRY_EXC_ERR:
      return "the peer did not acknowledge: its process or port is gone, or the path to it is broken (check "
             "ib-verbs.timeout / retry_count, the link and, on RoCE, the GID and lossless settings)";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "the peer posted no receive in time (receiver not ready)";
    case IBV_WC_REM_ACCESS_ERR:
      return "the peer refused access to its memory: a stale or deregistered key, or a write past its region";
    case IBV_WC_WR_FLUSH_ERR: return "the queue pair was already in error after an earlier failure";
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR: return "a local buffer is not (or no longer) registered for this access";
    case IBV_WC_LOC_LEN_ERR: return "a length exceeded what the queue pair or region allows";
    default: return "";
  }
}

}  // namespace

pb_status statusForCompletion(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return PB_OK;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
    case IBV_WC_WR_FLUSH_ERR: return PB_ERR_REMOTE;
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_EEC_OP_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_MW_BIND_ERR: return PB_ERR_INTERNAL;
    default: return PB_ERR_SYSTEM;
  }
}

std::string operationText(OpKind kind, uint32_t flushReads) {
  std::string what = kind == OpKind::Write    ? "RDMA write"
                     : kind == OpKind::Signal ? "signal (RDMA atomic add)"
                                              : "write with signal";
  if (flushReads) what += " and its " + std::to_string(flushReads) + " GPUDirect flush read(s) of the peer's GPU memory";
  return what;
}

std::string completionError(ibv_wc_status status, const CompletionParties& p) {
  std::string out = "ib-verbs: " + p.operation + " from rank " + std::to_string(p.localRank) + " (host " +
                    p.localHost + ") to rank " + std::to_string(p.peerRank) + " (host " + p.peerHost + ") over " +
                    p.port + " failed: " + ibv_wc_status_str(status) + " (status " +
                    std::to_string(static_cast<int>(status)) + ")";
  const std::string hint = hintFor(status);
  return hint.empty() ? out : out + ": " + hint;
}

}  // namespace plugboard::ibverbs
