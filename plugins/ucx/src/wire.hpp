// Byte layouts of the two blobs the core carries between ranks for the ucx
// transport: the address blob from setup() and the packed remote key. Each
// is a fixed 40-byte little-endian header followed by bytes UCX produced
// (a worker address, packed UCP rkeys). UCX parses those bytes without
// defending against garbage, so the header carries their exact lengths and
// a checksum over everything, and nothing reaches UCX unless both hold.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace plugboard::ucx::wire {

/// Format version shared by both layouts; bumped on any change.
constexpr uint32_t kVersion = 1;
/// "PBUA": address blob from setup().
constexpr uint32_t kAddressMagic = 0x41554250;
/// "PBUR": packed remote key.
constexpr uint32_t kRkeyMagic = 0x52554250;
/// Value a closing rank stores in its peer's control word (see
/// Connection::close): "CLOSEDPB" read as little-endian ASCII.
constexpr uint64_t kCloseMarker = 0x42504445534f4c43ull;

using plugboard::transport_cxx::loadLE;
using plugboard::transport_cxx::storeLE;

/// FNV-1a 64 over bytes, continuing from h (start with kFnvBasis).
uint64_t fnv1a(const uint8_t* bytes, size_t n, uint64_t h);
/// FNV-1a 64 offset basis.
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull;

/// setup()'s address blob, 40-byte header then payload:
///   magic u32 | version u32 | rank i32 | reserved u32 (0) |
///   control_addr u64 | worker_len u32 | control_rkey_len u32 |
///   checksum u64 (FNV-1a 64 of the header with this field zero, then the payload) |
///   worker address (worker_len bytes, ucp_worker_get_address) |
///   control-word rkey (control_rkey_len bytes, ucp_rkey_pack).
struct AddressBlob {
  static constexpr size_t kHeaderSize = 40;
  int32_t rank = -1;                     ///< Rank that wrote the blob.
  uint64_t controlAddr = 0;              ///< Its control word for this connection.
  std::vector<uint8_t> workerAddress;    ///< Opaque to us; for ucp_ep_create.
  std::vector<uint8_t> controlRkey;      ///< Opaque to us; for ucp_ep_rkey_unpack.

  /// Size of the encoded blob.
  size_t encodedSize() const { return kHeaderSize + workerAddress.size() + controlRkey.size(); }
  /// Writes the encoded blob to out (encodedSize() bytes of room).
  void encode(uint8_t* out) const;
  /// Parses and checks a blob; returns "" and fills *blob, or why it is bad.
  static std::string decode(const uint8_t* in, size_t len, AddressBlob* blob);
};

/// A packed remote key, 40-byte header then payload:
///   magic u32 | version u32 | base u64 | size u64 | ucp_len u32 |
///   mem_type u32 (pb_mem_type) | checksum u64 (as above) |
///   packed UCP rkey (ucp_len bytes).
struct PackedRkey {
  static constexpr size_t kHeaderSize = 40;
  uint64_t base = 0;             ///< Owner's address of the region's first byte.
  uint64_t size = 0;             ///< Region bytes.
  uint32_t memType = 0;          ///< pb_mem_type of the region.
  std::vector<uint8_t> ucpRkey;  ///< Opaque to us; for ucp_ep_rkey_unpack.

  /// Size of the encoded key.
  size_t encodedSize() const { return kHeaderSize + ucpRkey.size(); }
  /// Writes the encoded key to out (encodedSize() bytes of room).
  void encode(uint8_t* out) const;
  /// Parses and checks a key; returns "" and fills *key, or why it is bad.
  static std::string decode(const uint8_t* in, size_t len, PackedRkey* key);
};

}  // namespace plugboard::ucx::wire
