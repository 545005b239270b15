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

void AddressBlob::encode(uint8_t* out) const {
  storeLE<uint32_t>(out, kAddressMagic);
  storeLE<uint32_t>(out + 4, kVersion);
  storeLE<int32_t>(out + 8, rank);
  storeLE<uint32_t>(out + 12, connToken);
  storeLE<uint64_t>(out + 16, controlAddr);
  storeLE<uint32_t>(out + 24, static_cast<uint32_t>(workerAddress.size()));
  storeLE<uint32_t>(out + 28, static_cast<uint32_t>(controlRkey.size()));
  storeLE<uint64_t>(out + kChecksumAt, 0);
  if (!workerAddress.empty()) std::memcpy(out + kHeaderSize, workerAddress.data(), workerAddress.size());
  if (!controlRkey.empty())
    std::memcpy(out + kHeaderSize + workerAddress.size(), controlRkey.data(), controlRkey.size());
  size_t payload = workerAddress.size() + controlRkey.size();
  storeLE<uint64_t>(out + kChecksumAt, blobChecksum(out, kHeaderSize, payload));
}

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
  if (workerLen == 0 || kHeaderSize + workerLen + rkeyLen != len)
    return "the address blob's lengths (header " + std::to_string(kHeaderSize) + " + worker address " +
           std::to_string(workerLen) + " + control key " + std::to_string(rkeyLen) + ") do not add up to its " +
           std::to_string(len) + " bytes";
  if (loadLE<uint64_t>(in + kChecksumAt) != blobChecksum(in, kHeaderSize, len - kHeaderSize))
    return "the address blob's checksum does not match (corrupted in transit?)";
  blob->rank = loadLE<int32_t>(in + 8);
  blob->connToken = loadLE<uint32_t>(in + 12);
  blob->controlAddr = loadLE<uint64_t>(in + 16);
  blob->workerAddress.assign(in + kHeaderSize, in + kHeaderSize + workerLen);
  blob->controlRkey.assign(in + kHeaderSize + workerLen, in + len);
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
  if (h->seq == 0) return "an active message with sequence number 0";
  if (h->flags & ~(kHasWrite | kHasSignal)) return "an active message with unknown flags " + std::to_string(h->flags);
  return "";
}

}  // namespace plugboard::ucx::wire
