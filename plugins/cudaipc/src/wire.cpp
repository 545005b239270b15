#include "wire.hpp"

#include <cstring>

namespace plugboard::cudaipc::wire {

void AddressBlob::encode(uint8_t* out) const {
  storeLE(out + 0, magic);
  storeLE(out + 4, version);
  storeLE(out + 8, static_cast<uint32_t>(rank));
  storeLE(out + 12, pid);
  storeLE(out + 16, machine);
  storeLE(out + 24, pidNamespace);
  std::memcpy(out + 32, gpuUuid.data(), 16);
  std::memcpy(out + 48, pciBusId.data(), 16);
}

AddressBlob AddressBlob::decode(const uint8_t* in) {
  AddressBlob b;
  b.magic = loadLE<uint32_t>(in + 0);
  b.version = loadLE<uint32_t>(in + 4);
  b.rank = static_cast<int32_t>(loadLE<uint32_t>(in + 8));
  b.pid = loadLE<uint32_t>(in + 12);
  b.machine = loadLE<uint64_t>(in + 16);
  b.pidNamespace = loadLE<uint64_t>(in + 24);
  std::memcpy(b.gpuUuid.data(), in + 32, 16);
  std::memcpy(b.pciBusId.data(), in + 48, 16);
  b.pciBusId[15] = '\0';  // text from a peer: always terminated here
  return b;
}

void PackedRkey::encode(uint8_t* out) const {
  storeLE(out + 0, magic);
  storeLE(out + 4, version);
  storeLE(out + 8, static_cast<uint32_t>(kind));
  storeLE(out + 12, pid);
  storeLE(out + 16, machine);
  storeLE(out + 24, pidNamespace);
  storeLE(out + 32, exportId);
  storeLE(out + 40, allocBase);
  storeLE(out + 48, allocSize);
  storeLE(out + 56, offset);
  storeLE(out + 64, size);
  std::memcpy(out + 72, handle.data(), handle.size());
}

PackedRkey PackedRkey::decode(const uint8_t* in) {
  PackedRkey k;
  k.magic = loadLE<uint32_t>(in + 0);
  k.version = loadLE<uint32_t>(in + 4);
  k.kind = static_cast<ExportKind>(loadLE<uint32_t>(in + 8));
  k.pid = loadLE<uint32_t>(in + 12);
  k.machine = loadLE<uint64_t>(in + 16);
  k.pidNamespace = loadLE<uint64_t>(in + 24);
  k.exportId = loadLE<uint64_t>(in + 32);
  k.allocBase = loadLE<uint64_t>(in + 40);
  k.allocSize = loadLE<uint64_t>(in + 48);
  k.offset = loadLE<uint64_t>(in + 56);
  k.size = loadLE<uint64_t>(in + 64);
  std::memcpy(k.handle.data(), in + 72, k.handle.size());
  return k;
}

}  // namespace plugboard::cudaipc::wire
