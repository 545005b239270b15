// The order in which one rank issues the sends and receives of a group
// (or a lone ncclSend / ncclRecv): pure, so every rank derives its part of
// one global order from its own calls.
//
// A message from a to b that is a's j-th send to b (and b's j-th receive
// from a) gets the key (k, j) with k = (b - a) mod n. A rank walks its keys
// in increasing order; at key (k, j) it sends its j-th message to rank + k
// and receives its j-th message from rank - k in one fused sendRecv. Sender
// and receiver meet at the same key, and a rank waits at key K only for
// ranks at key K, so the smallest key anyone waits at always completes: no
// order of calls within a group deadlocks. Messages to itself (k = 0) pair
// the j-th send with the j-th receive as a local copy.
#pragma once

#include <string>
#include <vector>

namespace plugboard::ncclapi {

/// One send or receive as the group recorded it.
struct P2POp {
  bool isSend;
  int peer;
};

/// One fused step: indexes into the op list, -1 for "no such direction".
struct P2PStep {
  int send = -1;
  int recv = -1;
  bool self = false;  ///< send and recv are both to this rank: a copy.
};

/// The steps of a rank's ops (every op appears in exactly one step).
/// Throws Error(InvalidUsage) naming the op when a peer is out of range or
/// the sends to itself and the receives from itself do not pair up.
std::vector<P2PStep> scheduleP2P(int rank, int nranks, const std::vector<P2POp>& ops);

}  // namespace plugboard::ncclapi
