// Checks of a parsed plan that span ranks.
#pragma once

#include "plugboard/plan.hpp"

namespace plugboard {

/// Throws Error(Config) naming the plan and the JSON path when a put's
/// destination is out of the peer's bounds, a channel has no matching
/// channel on its peer, a rank's signals to a peer and the peer's waits
/// for them differ in number (a wait that can never end), a packets chunk
/// is put twice, or one that a reduce_packet waits for is never put.
void checkPlanAcrossRanks(const Plan& plan);

}  // namespace plugboard
