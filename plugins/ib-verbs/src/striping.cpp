#include "striping.hpp"

#include <algorithm>

namespace plugboard::ibverbs {

std::vector<Stripe> stripeWrite(uint64_t size, size_t qps, uint64_t minStripeBytes) {
  constexpr uint64_t kAlign = 64;
  const uint64_t minStripe = std::max<uint64_t>(minStripeBytes, 1);
  const uint64_t byMin = std::max<uint64_t>(size / minStripe, 1);
  const uint64_t n = std::min<uint64_t>(std::max<size_t>(qps, 1), byMin);
  uint64_t each = (size + n - 1) / n;
  each = (each + kAlign - 1) / kAlign * kAlign;
  std::vector<Stripe> out;
  uint64_t offset = 0;
  for (size_t qp = 0; qp < n && (offset < size || out.empty()); ++qp) {
    const uint64_t length = std::min(each, size - offset);
    out.push_back({qp, offset, length});
    offset += length;
  }
  return out;
}

}  // namespace plugboard::ibverbs
