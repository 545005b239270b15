// Whether an executor may start a call of a plan without the start
// handshake that keeps a rank's calls apart from its peers'.
#pragma once

#include "plugboard/plan.hpp"

namespace plugboard {

/// True for an LL plan whose packets go both ways on every pair that
/// exchanges any. Its executors keep two packets halves and use call k's
/// parity: a peer that reaches call k + 2 (the same half as call k) has
/// read this rank's packets of call k + 1, which this rank writes only
/// after it finished reading call k; and an LL plan writes nothing else
/// into a peer's storage (the loader refuses put and get there). Any
/// other plan starts each call with the handshake.
bool callsNeedNoHandshake(const Plan& plan);

}  // namespace plugboard
