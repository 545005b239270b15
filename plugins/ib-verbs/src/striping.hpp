// How one write is spread over a connection's queue pairs
// (ib-verbs.qps_per_connection): at most one stripe per QP, none smaller
// than ib-verbs.stripe_min_bytes (so small writes stay on one QP), each but
// the last a multiple of 64 bytes. A signal that follows goes out only
// after every stripe's completion, since QPs do not order among themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace plugboard::ibverbs {

/// One piece of a write: which QP carries it, and where.
struct Stripe {
  size_t qp = 0;
  uint64_t offset = 0;  ///< from the start of the write
  uint64_t length = 0;
};

/// The stripes of a write of size bytes over qps queue pairs (>= 1). A
/// zero-byte write is one empty stripe on QP 0. Stripes cover [0, size)
/// in order without gaps.
std::vector<Stripe> stripeWrite(uint64_t size, size_t qps, uint64_t minStripeBytes);

}  // namespace plugboard::ibverbs
