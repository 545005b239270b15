// What a failed work completion means, for the error the core shows: the
// pb_status it maps to and a sentence naming the operation, device, peer
// and what usually causes it.
#pragma once

#include <infiniband/verbs.h>
#include <plugboard/transport.h>

#include <cstdint>
#include <string>

namespace plugboard::ibverbs {

/// PB_OK for IBV_WC_SUCCESS; PB_ERR_REMOTE when the peer or the path to it
/// failed (retries exhausted, remote access or operation errors, a queue
/// pair flushed after such an error); PB_ERR_INTERNAL for local protection
/// and length errors (a bug: a region used after deregistration, a bad
/// length); PB_ERR_SYSTEM for the rest.
pb_status statusForCompletion(ibv_wc_status status);

/// What an operation posted: writes, a signal (an atomic add), or both.
enum class OpKind : uint8_t { Write, Signal, WriteSignal };

/// "RDMA write", "signal (RDMA atomic add)", "write with signal", with
/// " and its N GPUDirect flush read(s) of the peer's GPU memory" when a
/// signal waited for flush reads.
std::string operationText(OpKind kind, uint32_t flushReads);

/// Who and what a failed work completion concerns.
struct CompletionParties {
  std::string operation;  ///< operationText(), or what is known of the work request
  std::string port;       ///< This end's device and port, "mlx5_0 port 1"
  int localRank = -1;
  std::string localHost;
  int peerRank = -1;
  std::string peerHost;
};

/// The error a failed completion ends its connection with: "ib-verbs: RDMA
/// write from rank 0 (host a) to rank 3 (host b) over mlx5_0 port 1
/// failed: transport retry counter exceeded (status 12): <hint>", the
/// status named by ibv_wc_status_str.
std::string completionError(ibv_wc_status status, const CompletionParties& parties);

}  // namespace plugboard::ibverbs
