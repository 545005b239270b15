// Byte layouts of what the ucx transport puts on the wire: the two blobs
// the core carries between ranks (the address blob from setup() and the
// packed remote key) and the header of the active message that carries a
// write, a signal or both (protocol am). Each blob is a fixed little-endian
// header followed by bytes UCX produced (a worker address, packed UCP
// rkeys). UCX parses those bytes without defending against garbage, so the
// header carries their exact lengths and a checksum over everything, and
// nothing reaches UCX unless both hold.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace plugboard::ucx::wire {

/// Format version shared by every layout here; bumped on any change
/// (2: connection token, region id and check, active-message header;
/// 3: lanes: their worker addresses in the address blob, lane pieces).
constexpr uint32_t kVersion = 3;
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

/// Most lanes a blob may name.
constexpr uint32_t kMaxLanes = 16;

/// setup()'s address blob, 48-byte header then payload:
///   magic u32 | version u32 | rank i32 | conn_token u32 |
///   control_addr u64 | worker_len u32 | control_rkey_len u32 |
///   checksum u64 (FNV-1a 64 of the header with this field zero, then the payload) |
///   lane_count u32 | lanes_len u32 |
///   worker address (worker_len bytes, ucp_worker_get_address) |
///   control-word rkey (control_rkey_len bytes, ucp_rkey_pack) |
///   lanes_len bytes: per lane, address_len u32 then its worker address.
struct AddressBlob {
  static constexpr size_t kHeaderSize = 48;
  int32_t rank = -1;                     ///< Rank that wrote the blob.
  uint32_t connToken = 0;                ///< Names its connection in active messages sent to it.
  uint64_t controlAddr = 0;              ///< Its control word for this connection.
  std::vector<uint8_t> workerAddress;    ///< Opaque to us; for ucp_ep_create.
  std::vector<uint8_t> controlRkey;      ///< Opaque to us; for ucp_ep_rkey_unpack.
  std::vector<std::vector<uint8_t>> laneAddresses;  ///< Its lanes' worker addresses (README "Lanes").

  /// Bytes of the lane section.
  size_t lanesSize() const;
  /// Size of the encoded blob.
  size_t encodedSize() const { return kHeaderSize + workerAddress.size() + controlRkey.size() + lanesSize(); }
  /// Writes the encoded blob to out (encodedSize() bytes of room).
  void encode(uint8_t* out) const;
  /// Parses and checks a blob; returns "" and fills *blob, or why it is bad.
  static std::string decode(const uint8_t* in, size_t len, AddressBlob* blob);
};

/// A packed remote key, 56-byte header then payload:
///   magic u32 | version u32 | base u64 | size u64 | ucp_len u32 |
///   mem_type u32 (pb_mem_type) | checksum u64 (as above) |
///   region_id u64 | region_check u64 | packed UCP rkey (ucp_len bytes).
struct PackedRkey {
  static constexpr size_t kHeaderSize = 56;
  uint64_t base = 0;             ///< Owner's address of the region's first byte.
  uint64_t size = 0;             ///< Region bytes.
  uint32_t memType = 0;          ///< pb_mem_type of the region.
  uint64_t regionId = 0;         ///< The owner's id for the region (active messages name it).
  uint64_t regionCheck = 0;      ///< Random per registration: a stale id never matches a new region.
  std::vector<uint8_t> ucpRkey;  ///< Opaque to us; for ucp_ep_rkey_unpack.

  /// Size of the encoded key.
  size_t encodedSize() const { return kHeaderSize + ucpRkey.size(); }
  /// Writes the encoded key to out (encodedSize() bytes of room).
  void encode(uint8_t* out) const;
  /// Parses and checks a key; returns "" and fills *key, or why it is bad.
  static std::string decode(const uint8_t* in, size_t len, PackedRkey* key);
};

/// "PBUM": an active message of the ucx transport.
constexpr uint32_t kAmMagic = 0x4d554250;
/// The UCP active-message id the transport registers its handler for.
constexpr unsigned kAmId = 0x5042;

/// Header of the active message that carries one operation (protocol am),
/// 104 bytes little-endian; the write's bytes are the message's data:
///   magic u32 | conn_token u32 | seq u64 | flags u32 | from_rank i32 |
///   data_region u64 | data_check u64 | data_offset u64 | data_size u64 |
///   signal_region u64 | signal_check u64 | signal_offset u64 | value u64 |
///   lane_write u64 | lanes u32 | reserved u32 (0).
/// seq counts the active messages of one connection from 1 without gaps,
/// so the target can hold a signal back until every earlier write landed.
/// A write that went as lane pieces (kLaneWrite) carries no data: it has
/// landed once each of its `lanes` lanes landed its pieces numbered up to
/// lane_write.
struct AmHeader {
  static constexpr size_t kSize = 104;
  static constexpr uint32_t kHasWrite = 1;   ///< data_* name where the data goes.
  static constexpr uint32_t kHasSignal = 2;  ///< signal_* and value name an add.
  static constexpr uint32_t kLaneWrite = 4;  ///< The data travels as lane pieces numbered lane_write.
  uint32_t connToken = 0;      ///< The target's token for the connection (its address blob).
  uint64_t seq = 0;            ///< Active-message number on the connection, from 1.
  uint32_t flags = 0;          ///< kHasWrite | kHasSignal.
  int32_t fromRank = -1;       ///< Sender's rank, checked against the connection's peer.
  uint64_t dataRegion = 0, dataCheck = 0, dataOffset = 0, dataSize = 0;
  uint64_t signalRegion = 0, signalCheck = 0, signalOffset = 0, value = 0;
  uint64_t laneWrite = 0;      ///< With kLaneWrite: the connection's lane-write number, from 1.
  uint32_t lanes = 0;          ///< With kLaneWrite: how many lanes carry its pieces.

  /// Writes the header to out (kSize bytes).
  void encode(uint8_t* out) const;
  /// Parses a header; returns "" and fills *h, or why it is bad.
  static std::string decode(const void* in, size_t len, AmHeader* h);
};

/// "PBUL": a lane piece.
constexpr uint32_t kLaneMagic = 0x4c554250;
/// The UCP active-message id of lane pieces (on the lanes' own workers).
constexpr unsigned kLaneAmId = 0x5043;

/// Header of one lane piece (README "Lanes"), 56 bytes little-endian; the
/// piece's bytes are the message's data:
///   magic u32 | conn_token u32 | from_rank i32 | lane u32 | piece u64 |
///   data_region u64 | data_check u64 | data_offset u64 | data_size u64.
/// piece is the lane-write number of the write it belongs to: every lane
/// write sends one piece (maybe empty) on every lane, so a lane's pieces
/// of one connection are numbered 1, 2, 3, ...
struct LanePiece {
  static constexpr size_t kSize = 56;
  uint32_t connToken = 0;  ///< The target's token for the connection.
  int32_t fromRank = -1;   ///< Sender's rank.
  uint32_t lane = 0;       ///< Lane index (the same on both ends).
  uint64_t piece = 0;      ///< Lane-write number, from 1.
  uint64_t dataRegion = 0, dataCheck = 0, dataOffset = 0, dataSize = 0;

  /// Writes the header to out (kSize bytes).
  void encode(uint8_t* out) const;
  /// Parses a header; returns "" and fills *p, or why it is bad.
  static std::string decode(const void* in, size_t len, LanePiece* p);
};

}  // namespace plugboard::ucx::wire
