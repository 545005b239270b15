// The descriptor of a registered region that sendMemory hands a peer:
// owner, size, kind, region id and one packed key per transport that
// registered it. Decoding is the first thing done with a peer's bytes, so
// it checks everything it can without the communicator.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plugboard/communicator.hpp"

namespace plugboard {

/// A region as a peer describes it.
struct MemoryDescriptor {
  int32_t rank = -1;      ///< Owner.
  uint64_t size = 0;      ///< Bytes.
  MemoryKind kind = MemoryKind::Host;
  uint64_t regionId = 0;  ///< The owner's id for it (its transports check it).
  /// (transport name, packed remote key), one per transport that registered it.
  std::vector<std::pair<std::string, std::vector<char>>> keys;
};

/// The bytes sent for d.
std::vector<char> encodeMemoryDescriptor(const MemoryDescriptor& d);

/// Parses a peer's descriptor. Throws Error(Remote) naming `from` (e.g.
/// "rank 3") for a wrong magic, truncation, a kind other than host or
/// CUDA, a transport named twice, or bytes after the end.
MemoryDescriptor decodeMemoryDescriptor(const std::vector<char>& blob, const std::string& from);

}  // namespace plugboard
