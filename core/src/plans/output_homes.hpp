// Where an executor may keep each of a rank's output chunks during a run.
#pragma once

#include <vector>

#include "plugboard/plan.hpp"

namespace plugboard {

/// For each of `rank`'s output chunks: true when it must live in the
/// rank's registered storage during a run, because a peer writes it (put,
/// put_packet) or reads it (get) through a channel, or the rank's own port
/// channel puts from it (transports read registered memory only). Every
/// other output chunk is touched by the rank's own thread blocks alone, so
/// an out-of-place executor may keep it in the caller's output buffer and
/// save the copy there at the end. A chunk range that one operation names
/// keeps one home: if some of its chunks must be in the storage, all are.
std::vector<bool> outputChunksInStorage(const Plan& plan, int rank);

}  // namespace plugboard
