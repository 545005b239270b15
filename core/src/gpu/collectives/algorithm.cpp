#include "gpu/collectives/algorithm.hpp"

#include <algorithm>

#include "gpu/collectives/collectives_impl.hpp"

namespace plugboard::gpucoll {
namespace {

/// Bytes one rank sends its peers in a one-shot exchange of `bytes`.
uint64_t oneShotBytes(CommShape shape, uint64_t bytes) { return bytes * static_cast<uint64_t>(shape.nranks - 1); }

}  // namespace

ReducePath reducePath(const GpuCollSettings& s, CommShape shape, uint64_t bytes) {
  const uint64_t sent = oneShotBytes(shape, bytes);
  if (!shape.portPairs && sent < s.smallBytes) return ReducePath::LL;
  return sent < s.oneShotBytes ? ReducePath::OneShot : ReducePath::TwoShot;
}

bool broadcastUsesLL(const GpuCollSettings& s, CommShape shape, uint64_t bytes) {
  return !shape.portPairs && oneShotBytes(shape, bytes) < s.broadcastSmallBytes;
}

bool blocksUseLL(const GpuCollSettings& s, CommShape shape, uint64_t blockBytes) {
  return !shape.portPairs && oneShotBytes(shape, blockBytes) < s.blocksSmallBytes;
}

bool p2pUsesLL(const GpuCollSettings& s, CommShape shape, uint64_t bytes) {
  return !shape.portPairs && bytes > 0 && bytes < s.p2pSmallBytes;
}

uint64_t largestLLBytes(const GpuCollSettings& s, int nranks) {
  return std::max({s.smallBytes, s.broadcastSmallBytes, s.blocksSmallBytes}) /
         static_cast<uint64_t>(std::max(nranks - 1, 1));
}

}  // namespace plugboard::gpucoll
