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

/// True for a simple plan, not in place, in which every rank that puts
/// into a peer waits for a signal from that peer in every call (the
/// loader matches each wait with a signal). A rank that puts into this
/// rank in call k + 2 has then had this rank's signal of call k + 1, sent
/// only after this rank finished call k; a get is served by its owner in
/// the owner's own call. So the host executor may run such a plan without
/// the handshake, keeping two halves of the output and scratch (what
/// peers write) and using call k's parity; the input, which no peer
/// writes, is taken in at each call's start, which an in-place plan's
/// output would not survive.
bool putsWaitForTheirTarget(const Plan& plan);

}  // namespace plugboard
