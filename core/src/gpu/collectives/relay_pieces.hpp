// How a GPU call larger than the host relay's data area is cut into relayed
// calls ("pieces"), each a host collective of its own run in place on the
// area: the copy engine moves each piece's input in and its result out
// (strided rows where a rank's blocks lie apart), the relay kernel only
// posts the piece and waits for it. Host code, no CUDA: every rank cuts a
// call from its arguments and the area's size alone, so the ranks' pieces
// match one for one (docs/design.md "Failover of GPU calls through the relay").
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/collectives/device_ctx.hpp"
#include "gpu/collectives/relay_words.hpp"

namespace plugboard::gpucoll {

/// `rows` copies of `bytes` each: row i between the caller's buffer at
/// userOffset + i x userPitch and the data area at areaOffset + i x areaPitch.
/// rows == 0 or bytes == 0: nothing to copy.
struct RelayCopy {
  uint64_t userOffset = 0, areaOffset = 0, bytes = 0, rows = 0, userPitch = 0, areaPitch = 0;
  bool empty() const { return rows == 0 || bytes == 0; }
};

/// One piece: the call the host runs, what goes in before it (from the
/// caller's send buffer) and what comes out after (into its recv buffer).
struct RelayPiece {
  RelayCall call;
  RelayCopy in, out;
};

/// The arguments of a call to cut.
struct RelayCallShape {
  Coll coll = Coll::AllReduce;
  uint64_t count = 0;      ///< Elements: allreduce/reduce/broadcast the whole buffer; allgather,
                           ///< reducescatter, alltoall one rank block; send/recv/sendrecv the send side.
  uint64_t recvCount = 0;  ///< SendRecv only: elements received.
  uint32_t type = 0, op = 0, elementBytes = 1;
  int rank = 0, nranks = 1;
  int root = 0;            ///< Reduce, broadcast: root; send, sendrecv: the send peer; recv: the peer.
  int recvPeer = -1;       ///< SendRecv only.
};

/// The pieces of `shape`, in the order every rank runs them; each fits an
/// area of areaBytes (>= 16 x nranks x elementBytes). Zero elements: none.
/// Throws Error(InvalidUsage) for a collective the relay does not serve.
std::vector<RelayPiece> relayPieces(const RelayCallShape& shape, uint64_t areaBytes);

}  // namespace plugboard::gpucoll
