#include "wire.hpp"

#include <cstring>

namespace plugboard::ucx::wire {

namespace {

/// Byte offset of the checksum in both blob headers.
constexpr size_t kChecksumAt = 32;
/// Largest blob header.
constexpr size_t kMaxHeader = 56;

/// Checksum of a blob whose header is at p (checksum field read as zero)
/// and whose payload follows it.
uint64_t blobChecksum(const uint8_t* p, size_t headerSize, size_t payloadSize) {
  uint8_t header[kMaxHeader];
  std::memcpy(header, p, headerSize);
  std::memset(header + kChecksumAt, 0, 8);
  uint64_t h = fnv1a(header, headerSize, kFnvBasis);
  return fnv1a(p + headerSize, payloadSize, h);
}

}  // namespace

uint64_t fnv1a(const uint8_t* bytes, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) {
    h ^= bytes[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

size_t AddressBlob::lanesSize() const {
  size_t n = 0;
  for (const auto& a : laneAddresses) n += 4 + a.size();
  return n;
}

void AddressBlob::encode(uint8_t* out) const {
  storeLE<uint32_t>(out, kAddressMagic);
  storeLE<uint32_t>(out + 4, kVersion);
  storeLE<int32_t>(out + 8, rank);
  storeLE<uint32_t>(out + 12, connToken);
  storeLE<uint64_t>(out + 16, controlAddr);
  storeLE<uint32_t>(out + 24, static_cast<uint32_t>(workerAddress.size()));
  storeLE<uint32_t>(out + 28, static_cast<uint32_t>(controlRkey.size()));
  storeLE<uint64_t>(out + kChecksumAt, 0);
  storeLE<uint32_t>(out + 40, static_cast<uint32_t>(laneAddresses.size()));
  storeLE<uint32_t>(out + 44, static_cast<uint32_t>(lanesSize()));
  uint8_t* p = out + kHeaderSize;
  for (const auto* part : {&workerAddress, &controlRkey}) {
    if (!part->empty()) std::memcpy(p, part->data(), part->size());
    p += part->size();
  }
  for (const auto& a : laneAddresses) {
    storeLE<uint32_t>(p, static_cast<uint32_t>(a.size()));
    if (!a.empty()) std::memcpy(p + 4, a.data(), a.size());
    p += 4 + a.size();
  }
  storeLE<uint64_t>(out + kChecksumAt, blobChecksum(out, kHeaderSize, encodedSize() - kHeaderSize));
}

namespace {

/// Splits a blob's lane section (count addresses, each length-prefixed)
/// into out; returns "" or why it is bad.
std::string decodeLanes(const uint8_t* p, size_t len, uint32_t count, std::vector<std::vector<uint8_t>>* out) {
  if (count > kMaxLanes)
    return "the address blob names " + std::to_string(count) + " lanes, more than " + std::to_string(kMaxLanes);
  out->clear();
  size_t at = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (len - at < 4) return "the address blob's lane section ends inside lane " + std::to_string(i);
    const size_t n = loadLE<uint32_t>(p + at);
    at += 4;
    if (n == 0 || n > len - at)
      return "the address blob's lane " + std::to_string(i) + " has an address of " + std::to_string(n) +
             " bytes, and " + std::to_string(len - at) + " are left";
    out->emplace_back(p + at, p + at + n);
    at += n;
  }
  if (at != len) return "the address blob's lane section has " + std::to_string(len - at) + " bytes too many";
  return "";
}

}  // namespace

std::string AddressBlob::decode(const uint8_t* in, size_t len, AddressBlob* blob) {
  if (!in) return "the address blob is NULL";
  if (len < kHeaderSize)
    return "the address blob has " + std::to_string(len) + " bytes, less than its " +
           std::to_string(kHeaderSize) + "-byte header";
  if (loadLE<uint32_t>(in) != kAddressMagic) return "not a ucx address blob (bad magic)";
  uint32_t version = loadLE<uint32_t>(in + 4);
  if (version != kVersion)
    return "address blob format version " + std::to_string(version) + ", this plugin speaks " +
           std::to_string(kVersion);
  uint64_t workerLen = loadLE<uint32_t>(in + 24), rkeyLen = loadLE<uint32_t>(in + 28);
  uint64_t lanesLen = loadLE<uint32_t>(in + 44);
  if (workerLen == 0 || kHeaderSize + workerLen + rkeyLen + lanesLen != len)
    return "the address blob's lengths (header " + std::to_string(kHeaderSize) + " + worker address " +
           std::to_string(workerLen) + " + control key " + std::to_string(rkeyLen) + " + lanes " +
           std::to_string(lanesLen) + ") do not add up to its " + std::to_string(len) + " bytes";
  if (loadLE<uint64_t>(in + kChecksumAt) != blobChecksum(in, kHeaderSize, len - kHeaderSize))
    return "the address blob's checksum does not match (corrupted in transit?)";
  const uint8_t* lanes = in + kHeaderSize + workerLen + rkeyLen;
  std::string why = decodeLanes(lanes, lanesLen, loadLE<uint32_t>(in + 40), &blob->laneAddresses);
  if (!why.empty()) return why;
  blob->rank = loadLE<int32_t>(in + 8);
  blob->connToken = loadLE<uint32_t>(in + 12);
  blob->controlAddr = loadLE<uint64_t>(in + 16);
  blob->workerAddress.assign(in + kHeaderSize, in + kHeaderSize + workerLen);
  blob->controlRkey.assign(in + kHeaderSize + workerLen, lanes);
  return "";
}

void PackedRkey::encode(uint8_t* out) const {
  storeLE<uint32_t>(out, kRkeyMagic);
  storeLE<uint32_t>(out + 4, kVersion);
  storeLE<uint64_t>(out + 8, base);
  storeLE<uint64_t>(out + 16, size);
  storeLE<uint32_t>(out + 24, static_cast<uint32_t>(ucpRkey.size()));
  storeLE<uint32_t>(out + 28, memType);
  storeLE<uint64_t>(out + kChecksumAt, 0);
  storeLE<uint64_t>(out + 40, regionId);
  storeLE<uint64_t>(out + 48, regionCheck);
  if (!ucpRkey.empty()) std::memcpy(out + kHeaderSize, ucpRkey.data(), ucpRkey.size());
  storeLE<uint64_t>(out + kChecksumAt, blobChecksum(out, kHeaderSize, ucpRkey.size()));
}

std::string PackedRkey::decode(const uint8_t* in, size_t len, PackedRkey* key) {
  if (!in) return "the key is NULL";
  if (len < kHeaderSize)
    return "a ucx key has a " + std::to_string(kHeaderSize) + "-byte header, got " + std::to_string(len) +
           " bytes (a key packed by another transport?)";
  if (loadLE<uint32_t>(in) != kRkeyMagic) return "not a ucx key (bad magic; packed by another transport?)";
  uint32_t version = loadLE<uint32_t>(in + 4);
  if (version != kVersion)
    return "key format version " + std::to_string(version) + ", this plugin speaks " + std::to_string(kVersion);
  uint64_t ucpLen = loadLE<uint32_t>(in + 24);
  if (ucpLen == 0 || kHeaderSize + ucpLen != len)
    return "the key's lengths (header " + std::to_string(kHeaderSize) + " + UCX key " + std::to_string(ucpLen) +
           ") do not add up to its " + std::to_string(len) + " bytes";
  if (loadLE<uint64_t>(in + kChecksumAt) != blobChecksum(in, kHeaderSize, len - kHeaderSize))
    return "the key's checksum does not match (corrupted in transit?)";
  key->base = loadLE<uint64_t>(in + 8);
  key->size = loadLE<uint64_t>(in + 16);
  key->memType = loadLE<uint32_t>(in + 28);
  key->regionId = loadLE<uint64_t>(in + 40);
  key->regionCheck = loadLE<uint64_t>(in + 48);
  key->ucpRkey.assign(in + kHeaderSize, in + len);
  return "";
}

void AmHeader::encode(uint8_t* out) const {
  storeLE<uint32_t>(out, kAmMagic);
  storeLE<uint32_t>(out + 4, connToken);
  storeLE<uint64_t>(out + 8, seq);
  storeLE<uint32_t>(out + 16, flags);
  storeLE<int32_t>(out + 20, fromRank);
  const uint64_t words[] = {dataRegion, dataCheck, dataOffset, dataSize, signalRegion, signalCheck, signalOffset, value};
  for (size_t i = 0; i < 8; ++i) storeLE<uint64_t>(out + 24 + 8 * i, words[i]);
  storeLE<uint64_t>(out + 88, laneWrite);
  storeLE<uint32_t>(out + 96, lanes);
  storeLE<uint32_t>(out + 100, 0);
}

std::string AmHeader::decode(const void* in, size_t len, AmHeader* h) {
  if (!in || len != kSize)
    return "an active-message header of " + std::to_string(len) + " bytes (expected " + std::to_string(kSize) + ")";
  const auto* p = static_cast<const uint8_t*>(in);
  if (loadLE<uint32_t>(p) != kAmMagic) return "an active message without the ucx transport's magic";
  h->connToken = loadLE<uint32_t>(p + 4);
  h->seq = loadLE<uint64_t>(p + 8);
  h->flags = loadLE<uint32_t>(p + 16);
  h->fromRank = loadLE<int32_t>(p + 20);
  uint64_t* words[] = {&h->dataRegion,   &h->dataCheck,   &h->dataOffset,   &h->dataSize,
                       &h->signalRegion, &h->signalCheck, &h->signalOffset, &h->value};
  for (size_t i = 0; i < 8; ++i) *words[i] = loadLE<uint64_t>(p + 24 + 8 * i);
  h->laneWrite = loadLE<uint64_t>(p + 88);
  h->lanes = loadLE<uint32_t>(p + 96);
  if (loadLE<uint32_t>(p + 100) != 0) return "an active message with a non-zero reserved field";
  if (h->seq == 0) return "an active message with sequence number 0";
  if (h->flags & ~(kHasWrite | kHasSignal | kLaneWrite))
    return "an active message with unknown flags " + std::to_string(h->flags);
  if ((h->flags & kLaneWrite) && (!(h->flags & kHasWrite) || h->laneWrite == 0 || h->lanes == 0 ||
                                  h->lanes > kMaxLanes))
    return "an active message marked as a lane write without a write, a lane-write number or 1-" +
           std::to_string(kMaxLanes) + " lanes";
  return "";
}

void LanePiece::encode(uint8_t* out) const {
  storeLE<uint32_t>(out, kLaneMagic);
  storeLE<uint32_t>(out + 4, connToken);
  storeLE<int32_t>(out + 8, fromRank);
  storeLE<uint32_t>(out + 12, lane);
  const uint64_t words[] = {piece, dataRegion, dataCheck, dataOffset, dataSize};
  for (size_t i = 0; i < 5; ++i) storeLE<uint64_t>(out + 16 + 8 * i, words[i]);
}

std::string LanePiece::decode(const void* in, size_t len, LanePiece* h) {
  if (!in || len != kSize)
    return "a lane-piece header of " + std::to_string(len) + " bytes (expected " + std::to_string(kSize) + ")";
  const auto* p = static_cast<const uint8_t*>(in);
  if (loadLE<uint32_t>(p) != kLaneMagic) return "a lane message without the ucx transport's lane magic";
  h->connToken = loadLE<uint32_t>(p + 4);
  h->fromRank = loadLE<int32_t>(p + 8);
  h->lane = loadLE<uint32_t>(p + 12);
  uint64_t* words[] = {&h->piece, &h->dataRegion, &h->dataCheck, &h->dataOffset, &h->dataSize};
  for (size_t i = 0; i < 5; ++i) *words[i] = loadLE<uint64_t>(p + 16 + 8 * i);
  if (h->piece == 0) return "a lane piece numbered 0";
  return "";
}

}  // namespace plugboard::ucx::wire
