#include "gpu/collectives/algorithm.hpp"

#include <algorithm>

#include "gpu/collectives/collectives_impl.hpp"

namespace plugboard::gpucoll {
namespace {

/// Bytes one rank sends its peers in a one-shot exchange of `bytes`.
uint64_t oneShotBytes(CommShape shape, uint64_t bytes) { return bytes * static_cast<uint64_t>(shape.nranks - 1); }

}  // namespace

ReducePath reducePath(const GpuCollSettings& s, CommShape shape, uint64_t bytes) {
  if (usesRelay(s, shape, bytes)) return ReducePath::Relay;
  const uint64_t sent = oneShotBytes(shape, bytes);
  if (!shape.portPairs && sent < s.smallBytes) return ReducePath::LL;
  // Per rank one-shot sends (n-1) x bytes, two-shot 2 (n-1) / n x bytes: the
  // same on 2 ranks; beyond, one-shot's saved hop pays only while its extra
  // bytes are few.
  const uint64_t n = static_cast<uint64_t>(shape.nranks);
  const uint64_t extra = sent - 2 * sent / n;
  return sent < s.oneShotBytes && extra < kOneShotMaxExtraBytes ? ReducePath::OneShot : ReducePath::TwoShot;
}

bool usesRelay(const GpuCollSettings& s, CommShape shape, uint64_t areaBytes) {
  return shape.portPairs && areaBytes > 0 && (areaBytes <= s.relayBytes || s.relayAll);
}

bool relaysInPieces(const GpuCollSettings& s, uint64_t areaBytes) { return areaBytes > s.relayBytes; }

bool p2pUsesRelay(const GpuCollSettings& s, CommShape shape) { return shape.portPairs && s.relayAll; }

uint64_t pipelineChunkCap(const GpuCollSettings& s, CommShape shape, int fanout) {
  if (shape.portPairs || fanout <= 1) return s.chunkBytes;
  uint64_t cap = 1024;
  while (cap * 2 <= s.chunkBytes / static_cast<uint64_t>(fanout)) cap *= 2;
  return std::min<uint64_t>(cap, s.chunkBytes);
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

uint32_t sharedGpuBlockCap(const std::vector<GpuSeat>& seats) {
  uint64_t cap = UINT32_MAX;
  for (const GpuSeat& seat : seats) {
    uint64_t sharing = 0;
    for (const GpuSeat& other : seats) sharing += other.gpu == seat.gpu ? 1 : 0;
    cap = std::min<uint64_t>(cap, seat.residentBlocks / sharing);
  }
  return static_cast<uint32_t>(std::max<uint64_t>(cap, 1));
}

uint64_t largestLLBytes(const GpuCollSettings& s, int nranks) {
  return std::max({s.smallBytes, s.broadcastSmallBytes, s.blocksSmallBytes}) /
         static_cast<uint64_t>(std::max(nranks - 1, 1));
}

}  // namespace plugboard::gpucoll
