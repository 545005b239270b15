// A registered local region (pb_mr) and an imported peer region (pb_rkey):
// what the HCA needs to reach each (lkey / rkey) and the range every write
// and signal is checked against before it is posted.
#pragma once

#include <plugboard/transport.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "verbs.hpp"
#include "wire.hpp"

namespace plugboard::ibverbs {

/// A local region registered with ibv_reg_mr (remote write, read and atomics).
struct LocalRegion {
  MemoryRegion mr;
  char* base = nullptr;
  size_t size = 0;
  pb_mem_type type = PB_MEM_HOST;
  uint64_t id = 0;     ///< Names the region in messages (counts from 1 per context).
  uint64_t check = 0;  ///< Random; carried in the packed key for messages only.
};

/// A peer's region as its packed key describes it.
struct RemoteRegion {
  wire::PackedKey key;
};

/// Writes the region's packed key (wire::PackedKey::kSize bytes) into buf
/// and that size into *len; Error(PB_ERR_INVALID) when *len was smaller.
void packRkey(const LocalRegion& region, void* buf, size_t* len);

/// True when [offset, offset + size) lies within a region of regionSize bytes.
inline bool rangeFits(uint64_t offset, uint64_t size, uint64_t regionSize) {
  return offset <= regionSize && size <= regionSize - offset;
}

}  // namespace plugboard::ibverbs
