// What a failed work completion means, for the error the core shows: the
// pb_status it maps to and a sentence naming the operation, device, peer
// and what usually causes it.
#pragma once

#include <infiniband/verbs.h>
#include <plugboard/transport.h>

#include <string>

namespace plugboard::ibverbs {

/// PB_OK for IBV_WC_SUCCESS; PB_ERR_REMOTE when the peer or the path to it
/// failed (retries exhausted, remote access or operation errors, a queue
/// pair flushed after such an error); PB_ERR_INTERNAL for local protection
/// and length errors (a bug: a region used after deregistration, a bad
/// length); PB_ERR_SYSTEM for the rest.
pb_status statusForCompletion(ibv_wc_status status);

/// "ib-verbs: RDMA write to rank 3 (host h) over mlx5_0 port 1 failed:
/// transport retry counter exceeded (IBV_WC_RETRY_EXC_ERR, 12): <hint>".
/// what names the operation and peer; device the device and port.
std::string completionText(ibv_wc_status status, const std::string& what, const std::string& device);

}  // namespace plugboard::ibverbs
