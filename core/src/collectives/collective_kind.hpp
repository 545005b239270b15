// The collectives, as stamped into every chunk header.
#pragma once

#include <cstdint>

namespace plugboard {

/// Which collective a chunk belongs to.
/// FailureNotice is not a collective: a rank whose call failed sends it to
/// its peers instead of its next chunk (collectives/failure_notice.hpp).
enum class CollectiveKind : uint8_t { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv, FailureNotice };

/// "allreduce", "allgather", ...
inline const char* collectiveKindName(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "allreduce";
    case CollectiveKind::AllGather: return "allgather";
    case CollectiveKind::ReduceScatter: return "reducescatter";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Reduce: return "reduce";
    case CollectiveKind::AllToAll: return "alltoall";
    case CollectiveKind::SendRecv: return "sendrecv";
    case CollectiveKind::FailureNotice: return "failure notice";
  }
  return "unknown-collective";
}

/// True for the collectives that take a ReduceOp.
inline bool collectiveReduces(CollectiveKind k) {
  return k == CollectiveKind::AllReduce || k == CollectiveKind::ReduceScatter || k == CollectiveKind::Reduce;
}

}  // namespace plugboard
