// Whether an executor may start a call of a plan without the start
// handshake that keeps a rank's calls apart from its peers'.
#pragma once

#include <vector>

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

/// True for a plan without port channels in which every access of a
/// peer's buffers (put, put_packet and get; switch_reduce and
/// switch_broadcast, which reach every rank's bound buffer) happens, within
/// one call, after some operation of that peer and before another one
/// (through signals and the waits they satisfy, each thread block's order,
/// and barriers: the orders of happensAfterRank). A rank's operations of
/// call k run in its call k, which begins after its call k - 1 ended and
/// the stream work before it is done, and ends before its call k + 1
/// begins; so no peer reaches its buffers outside its own call, and the
/// GPU executor starts such calls without the handshake (allreduce_switch:
/// every rank signals every other before its first switch operation and
/// after its last). Port channels keep it: the proxy's writes land after
/// the operation that asked for them.
bool accessesStayInsideTheOwnersCall(const Plan& plan);

/// True when, on every rank, each channel's operations are all in one
/// thread block, so that block can make the channel's start handshake
/// itself. Decided over the whole plan so both ends of a channel handshake
/// the same way (the GPU executor's handshake kernel covers every slice,
/// its blocks only the slices a call runs).
bool channelsStayInOneBlock(const Plan& plan);

/// True for a simple plan, not in place, in which every rank that puts
/// into a peer hears from that peer in every call: some operation of the
/// peer's call happens before some operation of the writer's, through
/// signals and the waits they satisfy, each thread block's order, and
/// barriers (happensAfterRank). A rank that puts into this rank in call
/// k + 2 has then finished call k + 1, which heard from an operation of
/// this rank's call k + 1, begun only after this rank finished call k; a
/// get is served by its owner in the owner's own call. So the host
/// executor may run such a plan without the handshake, keeping two halves
/// of the output and scratch (what peers write) and using call k's parity;
/// the input, which no peer writes, is taken in at each call's start,
/// which an in-place plan's output would not survive. Allpairs plans hear
/// from each target directly (a wait for its signal), rings around the
/// ring.
bool putsHearFromTheirTarget(const Plan& plan);

/// For each rank r, whether some operation of rank r happens, within one
/// call, after some operation of rank `from` (true for `from` itself).
/// Only orders every run has count: a wait follows the signal it must have
/// had (on a channel whose signals one thread block makes, the j-th wait
/// of a single waiting block follows the j-th signal, any other wait the
/// first); a channel signalled from several blocks orders nothing.
std::vector<bool> happensAfterRank(const Plan& plan, int from);

}  // namespace plugboard
