#include "wire.hpp"

#include <algorithm>
#include <cstring>

namespace plugboard::ethernet::wire {

void AddressBlob::encode(uint8_t* out) const {
  storeLE(out + 0, magic);
  storeLE(out + 4, version);
  storeLE(out + 8, rank);
  storeLE(out + 12, family);
  storeLE(out + 14, port);
  std::memcpy(out + 16, address.data(), address.size());
}

AddressBlob AddressBlob::decode(const uint8_t* in) {
  AddressBlob b{};
  b.magic = loadLE<uint32_t>(in + 0);
  b.version = loadLE<uint32_t>(in + 4);
  b.rank = loadLE<int32_t>(in + 8);
  b.family = loadLE<uint16_t>(in + 12);
  b.port = loadLE<uint16_t>(in + 14);
  std::memcpy(b.address.data(), in + 16, b.address.size());
  return b;
}

void Hello::encode(uint8_t* out) const {
  storeLE(out + 0, magic);
  storeLE(out + 4, version);
  storeLE(out + 8, fromRank);
  storeLE(out + 12, toRank);
  storeLE(out + 16, socket);
  storeLE(out + 20, stripes);
}

Hello Hello::decode(const uint8_t* in) {
  return Hello{loadLE<uint32_t>(in),      loadLE<uint32_t>(in + 4),  loadLE<int32_t>(in + 8),
               loadLE<int32_t>(in + 12), loadLE<uint32_t>(in + 16), loadLE<uint32_t>(in + 20)};
}

PieceRange stripePiece(uint64_t length, uint32_t index, uint32_t count) {
  constexpr uint64_t kAlign = 4096;
  const uint64_t part = ((length + count - 1) / count + kAlign - 1) / kAlign * kAlign;
  const uint64_t begin = std::min(length, part * index);
  return PieceRange{begin, std::min(length, begin + part) - begin};
}

void FrameHeader::encode(uint8_t* out) const {
  storeLE(out + 0, magic);
  storeLE(out + 4, type);
  storeLE(out + 6, reserved);
  storeLE(out + 8, seq);
  storeLE(out + 16, region);
  storeLE(out + 24, key);
  storeLE(out + 32, offset);
  storeLE(out + 40, length);
}

void SignalExt::encode(uint8_t* out) const {
  storeLE(out + 0, region);
  storeLE(out + 8, key);
  storeLE(out + 16, offset);
  storeLE(out + 24, value);
}

SignalExt SignalExt::decode(const uint8_t* in) {
  return SignalExt{loadLE<uint64_t>(in + 0), loadLE<uint64_t>(in + 8), loadLE<uint64_t>(in + 16),
                   loadLE<uint64_t>(in + 24)};
}

FrameHeader FrameHeader::decode(const uint8_t* in) {
  FrameHeader h{};
  h.magic = loadLE<uint32_t>(in + 0);
  h.type = loadLE<uint16_t>(in + 4);
  h.reserved = loadLE<uint16_t>(in + 6);
  h.seq = loadLE<uint64_t>(in + 8);
  h.region = loadLE<uint64_t>(in + 16);
  h.key = loadLE<uint64_t>(in + 24);
  h.offset = loadLE<uint64_t>(in + 32);
  h.length = loadLE<uint64_t>(in + 40);
  return h;
}

void PackedRkey::encode(uint8_t* out) const {
  storeLE(out + 0, magic);
  storeLE(out + 4, version);
  storeLE(out + 8, region);
  storeLE(out + 16, key);
  storeLE(out + 24, base);
  storeLE(out + 32, size);
}

PackedRkey PackedRkey::decode(const uint8_t* in) {
  return PackedRkey{loadLE<uint32_t>(in),      loadLE<uint32_t>(in + 4),  loadLE<uint64_t>(in + 8),
                    loadLE<uint64_t>(in + 16), loadLE<uint64_t>(in + 24), loadLE<uint64_t>(in + 32)};
}

}  // namespace plugboard::ethernet::wire
