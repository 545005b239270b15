#include "wire.hpp"

#include <algorithm>
#include <cstring>

#include "error.hpp"

namespace plugboard::libfabric::wire {

size_t AddressBlob::size() const {
  size_t n = kHeaderSize + name.size() + 2;
  for (const auto& lane : laneNames) n += 2 + lane.size();
  return n;
}

void AddressBlob::encode(uint8_t* out) const {
  std::memset(out, 0, kHeaderSize);
  storeLE(out + 0, magic);
  storeLE(out + 4, version);
  storeLE(out + 6, static_cast<uint16_t>(name.size()));
  storeLE(out + 8, rank);
  storeLE(out + 12, addrFormat);
  storeLE(out + 16, conn);
  std::memcpy(out + 24, provider.data(), std::min(provider.size(), kProviderField - 1));
  if (!name.empty()) std::memcpy(out + kHeaderSize, name.data(), name.size());
  uint8_t* p = out + kHeaderSize + name.size();
  storeLE(p, static_cast<uint16_t>(laneNames.size()));
  p += 2;
  for (const auto& lane : laneNames) {
    storeLE(p, static_cast<uint16_t>(lane.size()));
    if (!lane.empty()) std::memcpy(p + 2, lane.data(), lane.size());
    p += 2 + lane.size();
  }
}

AddressBlob AddressBlob::decode(const uint8_t* in, size_t len, const std::string& from) {
  std::string what = "libfabric address blob from " + from;
  OFI_CHECK(in, PB_ERR_INVALID, what + " is NULL");
  OFI_CHECK(len >= kHeaderSize, PB_ERR_INVALID,
            what + " is " + std::to_string(len) + " bytes, shorter than its " + std::to_string(kHeaderSize) +
                "-byte header (a blob of another transport?)");
  AddressBlob b;
  b.magic = loadLE<uint32_t>(in);
  OFI_CHECK(b.magic == kAddressMagic, PB_ERR_INVALID, what + " has a bad magic (a blob of another transport?)");
  b.version = loadLE<uint16_t>(in + 4);
  OFI_CHECK(b.version == kVersion, PB_ERR_INVALID,
            what + " has format version " + std::to_string(b.version) + ", this plugin speaks " +
                std::to_string(kVersion));
  size_t nameLen = loadLE<uint16_t>(in + 6);
  OFI_CHECK(len >= kHeaderSize + nameLen + 2, PB_ERR_INVALID,
            what + " is " + std::to_string(len) + " bytes, too short for the " + std::to_string(nameLen) +
                "-byte endpoint name it announces and its lane count");
  b.rank = loadLE<int32_t>(in + 8);
  b.addrFormat = loadLE<uint32_t>(in + 12);
  b.conn = loadLE<uint64_t>(in + 16);
  const char* prov = reinterpret_cast<const char*>(in + 24);
  b.provider.assign(prov, strnlen(prov, kProviderField));
  b.name.assign(in + kHeaderSize, in + kHeaderSize + nameLen);
  const uint8_t* p = in + kHeaderSize + nameLen;
  const uint8_t* end = in + len;
  size_t lanes = loadLE<uint16_t>(p);
  p += 2;
  OFI_CHECK(lanes <= kMaxLanes, PB_ERR_INVALID,
            what + " names " + std::to_string(lanes) + " lanes, more than the " + std::to_string(kMaxLanes) +
                " a plugin may open");
  for (size_t i = 0; i < lanes; ++i) {
    OFI_CHECK(end - p >= 2, PB_ERR_INVALID, what + " ends before the name of lane " + std::to_string(i));
    size_t laneLen = loadLE<uint16_t>(p);
    OFI_CHECK(static_cast<size_t>(end - p - 2) >= laneLen, PB_ERR_INVALID,
              what + " ends inside the " + std::to_string(laneLen) + "-byte name of lane " + std::to_string(i));
    b.laneNames.emplace_back(p + 2, p + 2 + laneLen);
    p += 2 + laneLen;
  }
  OFI_CHECK(p == end, PB_ERR_INVALID,
            what + " has " + std::to_string(end - p) + " bytes after its last lane name");
  return b;
}

void PackedRkey::encode(uint8_t* out) const {
  storeLE(out + 0, magic);
  storeLE(out + 4, version);
  storeLE(out + 6, flags);
  storeLE(out + 8, region);
  storeLE(out + 16, check);
  storeLE(out + 24, mrKey);
  storeLE(out + 32, base);
  storeLE(out + 40, size);
  storeLE(out + 48, rmaBase);
  std::memset(out + 56, 0, kHeaderSize - 56);
  storeLE(out + 56, static_cast<uint16_t>(laneKeys.size()));
  for (size_t i = 0; i < laneKeys.size(); ++i) storeLE(out + kHeaderSize + 8 * i, laneKeys[i]);
}

PackedRkey PackedRkey::decode(const uint8_t* in, size_t len) {
  PackedRkey k;
  k.magic = loadLE<uint32_t>(in);
  k.version = loadLE<uint16_t>(in + 4);
  k.flags = loadLE<uint16_t>(in + 6);
  k.region = loadLE<uint64_t>(in + 8);
  k.check = loadLE<uint64_t>(in + 16);
  k.mrKey = loadLE<uint64_t>(in + 24);
  k.base = loadLE<uint64_t>(in + 32);
  k.size = loadLE<uint64_t>(in + 40);
  k.rmaBase = loadLE<uint64_t>(in + 48);
  size_t lanes = loadLE<uint16_t>(in + 56);
  OFI_CHECK(lanes <= kMaxLanes && len == kHeaderSize + 8 * lanes, PB_ERR_INVALID,
            "libfabric import_rkey: a key of " + std::to_string(len) + " bytes names " + std::to_string(lanes) +
                " lanes (at most " + std::to_string(kMaxLanes) + ", 8 bytes each after its " +
                std::to_string(kHeaderSize) + "-byte header)");
  for (size_t i = 0; i < lanes; ++i) k.laneKeys.push_back(loadLE<uint64_t>(in + kHeaderSize + 8 * i));
  return k;
}

void Message::encode(uint8_t* out) const {
  storeLE(out + 0, magic);
  storeLE(out + 4, version);
  storeLE(out + 6, type);
  storeLE(out + 8, fromRank);
  storeLE(out + 12, toRank);
  storeLE(out + 16, toConn);
  storeLE(out + 24, fromConn);
  storeLE(out + 32, region);
  storeLE(out + 40, check);
  storeLE(out + 48, offset);
  storeLE(out + 56, value);
}

Message Message::decode(const uint8_t* in) {
  Message m;
  m.magic = loadLE<uint32_t>(in);
  m.version = loadLE<uint16_t>(in + 4);
  m.type = loadLE<uint16_t>(in + 6);
  m.fromRank = loadLE<int32_t>(in + 8);
  m.toRank = loadLE<int32_t>(in + 12);
  m.toConn = loadLE<uint64_t>(in + 16);
  m.fromConn = loadLE<uint64_t>(in + 24);
  m.region = loadLE<uint64_t>(in + 32);
  m.check = loadLE<uint64_t>(in + 40);
  m.offset = loadLE<uint64_t>(in + 48);
  m.value = loadLE<uint64_t>(in + 56);
  return m;
}

void WriteExt::encode(uint8_t* out) const {
  storeLE(out + 0, region);
  storeLE(out + 8, check);
  storeLE(out + 16, offset);
  storeLE(out + 24, length);
}

WriteExt WriteExt::decode(const uint8_t* in) {
  WriteExt e;
  e.region = loadLE<uint64_t>(in);
  e.check = loadLE<uint64_t>(in + 8);
  e.offset = loadLE<uint64_t>(in + 16);
  e.length = loadLE<uint64_t>(in + 24);
  return e;
}

}  // namespace plugboard::libfabric::wire
