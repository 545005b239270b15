// How many stripe sockets a connection opens under stripe_sockets = auto.
// Header-only and free of the plugin's types, so tests can check the rule.
#pragma once

#include <cstdint>

namespace plugboard::ethernet {

/// What auto opens where it opens any (each stripe socket adds a sending
/// and a receiving thread per connection).
inline constexpr uint32_t kAutoStripes = 4;
/// Cores each rank of the host needs for auto to stripe. Measured
/// (docs/perf/2026-11-26-ethernet-stripes.md, 2026-11-26-network-path-session18.md):
/// 4 stripes won at 8 or more cores per local rank (16 cores / 2 ranks,
/// 32 / 4) and lost or tied at 4 or fewer (16 / 4 at 256 KiB - 1 MiB,
/// 16 / 8, 32 / 8, 2 / 2).
inline constexpr unsigned kStripeCoresPerRank = 8;
/// Without the local rank count (a core older than ABI 1.4): more than
/// this many cores stripe.
inline constexpr unsigned kStripeCoresAlone = 4;

/// Stripe sockets of a connection: `count` unless `automatic`; else
/// kAutoStripes where each of the host's localRanks ranks has at least
/// kStripeCoresPerRank of its `cores`, 0 otherwise (localRanks 0: unknown,
/// judged on the cores alone).
inline uint32_t stripesFor(bool automatic, uint32_t count, unsigned cores, int localRanks) {
  if (!automatic) return count;
  if (cores == 0) return 0;
  if (localRanks <= 0) return cores > kStripeCoresAlone ? kAutoStripes : 0;
  return cores / static_cast<unsigned>(localRanks) >= kStripeCoresPerRank ? kAutoStripes : 0;
}

}  // namespace plugboard::ethernet
