// Byte layouts the ib-verbs transport puts in the blobs the core carries
// between ranks: setup()'s address (the port's LID/GID/MTU and one QP
// number and starting PSN per queue pair of the connection) and
// pack_rkey()'s key (where a region is and its rkey). Little-endian
// throughout; decoding checks every field a peer could get wrong and names
// the peer.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace plugboard::ibverbs::wire {

/// Format of the address blob; bumped on any change (2: responder depth).
constexpr uint16_t kAddressVersion = 2;
/// Format of the packed key; bumped on any change.
constexpr uint16_t kKeyVersion = 1;
/// "PBIA": address blob.
constexpr uint32_t kAddressMagic = 0x41494250;
/// "PBIK": packed key.
constexpr uint32_t kKeyMagic = 0x4b494250;
/// Queue pairs one connection may stripe over (ib-verbs.qps_per_connection).
constexpr size_t kMaxQps = 16;

/// One queue pair as its owner announces it.
struct QpInfo {
  uint32_t qpn = 0;  ///< 24 bits
  uint32_t psn = 0;  ///< starting packet sequence number, 24 bits
};

/// setup()'s address blob: magic u32 | version u16 | nqps u16 | rank i32 |
/// lid u16 | mtu u8 (enum ibv_mtu) | link_layer u8 | gid 16 bytes |
/// responder_depth u8 | reserved 3 bytes (zero) | then nqps times
/// (qpn u32 | psn u32). 36 + 8 * nqps bytes.
struct AddressBlob {
  int32_t rank = -1;
  uint16_t lid = 0;
  uint8_t mtu = 0;        ///< IBV_MTU_256 (1) .. IBV_MTU_4096 (5)
  uint8_t linkLayer = 0;  ///< IBV_LINK_LAYER_INFINIBAND (1) or _ETHERNET (2)
  std::array<uint8_t, 16> gid{};
  /// RDMA reads and atomics this end's queue pairs take in flight from the
  /// peer (their max_dest_rd_atomic): the most the peer may have outstanding.
  uint8_t responderDepth = 1;
  std::vector<QpInfo> qps;

  static constexpr size_t kHeaderSize = 36;
  size_t size() const { return kHeaderSize + 8 * qps.size(); }
  /// Writes size() bytes to out.
  void encode(uint8_t* out) const;
  /// Reads len bytes from `from` ("rank 3 (host h)"); throws
  /// Error(PB_ERR_INVALID) for a short or long blob, a bad magic or
  /// version, 0 or more than kMaxQps queue pairs, an MTU or link layer
  /// out of range, a responder depth of 0, reserved bytes that are not
  /// zero, or a QP number or PSN wider than 24 bits.
  static AddressBlob decode(const uint8_t* in, size_t len, const std::string& from);
};

/// pack_rkey()'s blob, 48 bytes: magic u32 | version u16 | mem_type u16 |
/// rkey u32 | reserved u32 | region u64 | base u64 | size u64 | check u64.
/// region and check name the region in messages; base and size bound every
/// RDMA write into it.
struct PackedKey {
  uint16_t memType = 0;  ///< PB_MEM_HOST or PB_MEM_CUDA
  uint32_t rkey = 0;
  uint64_t region = 0;
  uint64_t base = 0;
  uint64_t size = 0;
  uint64_t check = 0;

  static constexpr size_t kSize = 48;
  void encode(uint8_t* out) const;
  /// Throws Error(PB_ERR_INVALID) for a wrong length, magic or version, an
  /// unknown memory type, a range that wraps around the address space, or
  /// reserved bytes that are not zero.
  static PackedKey decode(const uint8_t* in, size_t len, const std::string& from);
};

}  // namespace plugboard::ibverbs::wire
