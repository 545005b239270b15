#include "wire.hpp"

#include <infiniband/verbs.h>

#include <cstring>

#include "error.hpp"

namespace plugboard::ibverbs::wire {

using transport_cxx::loadLE;
using transport_cxx::storeLE;

namespace {

constexpr uint32_t k24Bits = 0xffffff;

[[noreturn]] void bad(const std::string& what, const std::string& from) {
  throw Error(PB_ERR_INVALID, "ib-verbs: bad " + what + " from " + from);
}

}  // namespace

void AddressBlob::encode(uint8_t* out) const {
  std::memset(out, 0, size());
  storeLE<uint32_t>(out, kAddressMagic);
  storeLE<uint16_t>(out + 4, kAddressVersion);
  storeLE<uint16_t>(out + 6, static_cast<uint16_t>(qps.size()));
  storeLE<int32_t>(out + 8, rank);
  storeLE<uint16_t>(out + 12, lid);
  out[14] = mtu;
  out[15] = linkLayer;
  std::memcpy(out + 16, gid.data(), gid.size());
  out[32] = responderDepth;
  for (size_t i = 0; i < qps.size(); ++i) {
    storeLE<uint32_t>(out + kHeaderSize + 8 * i, qps[i].qpn);
    storeLE<uint32_t>(out + kHeaderSize + 8 * i + 4, qps[i].psn);
  }
}

AddressBlob AddressBlob::decode(const uint8_t* in, size_t len, const std::string& from) {
  if (len < kHeaderSize) bad("address (" + std::to_string(len) + " bytes, less than a header)", from);
  if (loadLE<uint32_t>(in) != kAddressMagic) bad("address (not an ib-verbs address: wrong magic)", from);
  const uint16_t version = loadLE<uint16_t>(in + 4);
  if (version != kAddressVersion)
    bad("address (format " + std::to_string(version) + ", this plugin reads " + std::to_string(kAddressVersion) +
            ": run the same Plugboard on every rank)",
        from);
  const size_t nqps = loadLE<uint16_t>(in + 6);
  if (nqps == 0 || nqps > kMaxQps) bad("address (" + std::to_string(nqps) + " queue pairs)", from);
  if (len != kHeaderSize + 8 * nqps)
    bad("address (" + std::to_string(len) + " bytes for " + std::to_string(nqps) + " queue pairs)", from);
  AddressBlob a;
  a.rank = loadLE<int32_t>(in + 8);
  a.lid = loadLE<uint16_t>(in + 12);
  a.mtu = in[14];
  a.linkLayer = in[15];
  if (a.mtu < IBV_MTU_256 || a.mtu > IBV_MTU_4096) bad("address (MTU code " + std::to_string(a.mtu) + ")", from);
  if (a.linkLayer != IBV_LINK_LAYER_INFINIBAND && a.linkLayer != IBV_LINK_LAYER_ETHERNET)
    bad("address (link layer " + std::to_string(a.linkLayer) + ")", from);
  std::memcpy(a.gid.data(), in + 16, a.gid.size());
  a.responderDepth = in[32];
  if (a.responderDepth == 0) bad("address (a responder depth of 0: it would take no RDMA atomic)", from);
  if (in[33] != 0 || in[34] != 0 || in[35] != 0) bad("address (reserved bytes 33-35 are not zero)", from);
  for (size_t i = 0; i < nqps; ++i) {
    QpInfo q{loadLE<uint32_t>(in + kHeaderSize + 8 * i), loadLE<uint32_t>(in + kHeaderSize + 8 * i + 4)};
    if (q.qpn > k24Bits || q.psn > k24Bits) bad("address (queue pair " + std::to_string(i) + " wider than 24 bits)", from);
    a.qps.push_back(q);
  }
  return a;
}

void PackedKey::encode(uint8_t* out) const {
  std::memset(out, 0, kSize);
  storeLE<uint32_t>(out, kKeyMagic);
  storeLE<uint16_t>(out + 4, kKeyVersion);
  storeLE<uint16_t>(out + 6, memType);
  storeLE<uint32_t>(out + 8, rkey);
  storeLE<uint64_t>(out + 16, region);
  storeLE<uint64_t>(out + 24, base);
  storeLE<uint64_t>(out + 32, size);
  storeLE<uint64_t>(out + 40, check);
}

PackedKey PackedKey::decode(const uint8_t* in, size_t len, const std::string& from) {
  if (len != kSize) bad("remote key (" + std::to_string(len) + " bytes, expected " + std::to_string(kSize) + ")", from);
  if (loadLE<uint32_t>(in) != kKeyMagic) bad("remote key (not an ib-verbs key: wrong magic)", from);
  if (loadLE<uint16_t>(in + 4) != kKeyVersion) bad("remote key (format " + std::to_string(loadLE<uint16_t>(in + 4)) + ")", from);
  PackedKey k;
  k.memType = loadLE<uint16_t>(in + 6);
  k.rkey = loadLE<uint32_t>(in + 8);
  k.region = loadLE<uint64_t>(in + 16);
  k.base = loadLE<uint64_t>(in + 24);
  k.size = loadLE<uint64_t>(in + 32);
  k.check = loadLE<uint64_t>(in + 40);
  if (k.memType != PB_MEM_HOST && k.memType != PB_MEM_CUDA)
    bad("remote key (memory type " + std::to_string(k.memType) + ")", from);
  if (k.base + k.size < k.base) bad("remote key (a region that wraps around the address space)", from);
  // Reserved bytes must be zero: a later format may give them a meaning.
  if (loadLE<uint32_t>(in + 12) != 0) bad("remote key (reserved bytes 12-15 are not zero)", from);
  return k;
}

}  // namespace plugboard::ibverbs::wire
