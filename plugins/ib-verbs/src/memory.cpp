#include "memory.hpp"

#include "error.hpp"

namespace plugboard::ibverbs {

void packRkey(const LocalRegion& region, void* buf, size_t* len) {
  const size_t room = *len;
  *len = wire::PackedKey::kSize;
  if (room < wire::PackedKey::kSize)
    throw Error(PB_ERR_INVALID, "ib-verbs pack_rkey: buffer of " + std::to_string(room) +
                                    " bytes is smaller than the " + std::to_string(wire::PackedKey::kSize) +
                                    " an ib-verbs key needs");
  wire::PackedKey k;
  k.memType = static_cast<uint16_t>(region.type);
  k.rkey = region.mr->rkey;
  k.region = region.id;
  k.base = reinterpret_cast<uint64_t>(region.base);
  k.size = region.size;
  k.check = region.check;
  k.encode(static_cast<uint8_t*>(buf));
}

}  // namespace plugboard::ibverbs
