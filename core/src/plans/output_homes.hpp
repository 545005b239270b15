// Where an executor may keep each of a rank's input and output chunks
// during a run: in its registered storage, or in the caller's buffers.
#pragma once

#include <vector>

#include "plugboard/plan.hpp"

namespace plugboard {

/// For each of `rank`'s chunks of `buffer` (input or output): true when it
/// must live in the rank's registered storage during a run, because a peer
/// writes it (put, put_packet) or reads it (get) through a channel, or a
/// transport moves it for the rank itself: on GPU buffers (hostBuffers
/// false) a port channel's put or put_packet from it; on host buffers every
/// put or put_packet from it and every get into it (the owner writes a
/// get's data). Every other chunk is touched by the rank's own thread
/// blocks alone, so an out-of-place executor may keep it in the caller's
/// buffer and save copying it there. A chunk range that one operation
/// names keeps one home: if some of its chunks must be in the storage, all
/// are.
std::vector<bool> chunksInStorage(const Plan& plan, int rank, PlanChunk::Buffer buffer, bool hostBuffers);

}  // namespace plugboard
