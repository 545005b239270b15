// Byte layouts the libfabric transport puts in blobs the core carries
// between ranks (address, packed key) and in its control messages (hello,
// signal). Every integer is little-endian; the structs below are the
// decoded forms.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace plugboard::libfabric::wire {

/// Format version shared by every layout below; bumped on any change.
constexpr uint16_t kVersion = 4;
/// Most lanes (README "Lanes") a blob or key may name.
constexpr size_t kMaxLanes = 8;
/// "PBFA": address blob from setup().
constexpr uint32_t kAddressMagic = 0x41464250;
/// "PBFR": packed remote key.
constexpr uint32_t kRkeyMagic = 0x52464250;
/// "PBFM": control message.
constexpr uint32_t kMessageMagic = 0x4d464250;

using plugboard::transport_cxx::loadLE;
using plugboard::transport_cxx::storeLE;

/// setup()'s address blob: a 56-byte header, then the endpoint name from
/// fi_getname (name_len bytes):
/// magic u32 | version u16 | name_len u16 | rank i32 | addr_format u32 |
/// conn u64 (the sender's connection id, quoted in messages to it) |
/// provider 32 bytes (fi_fabric_attr.prov_name, NUL-padded, truncated to 31);
/// after the name: lanes u16 (at most kMaxLanes), then per lane name_len u16
/// and its endpoint name.
struct AddressBlob {
  uint32_t magic = kAddressMagic;
  uint16_t version = kVersion;
  int32_t rank = -1;
  uint32_t addrFormat = 0;
  uint64_t conn = 0;
  std::string provider;
  std::vector<uint8_t> name;
  std::vector<std::vector<uint8_t>> laneNames;  ///< The sender's lane endpoints, lane 0 first.

  static constexpr size_t kHeaderSize = 56;
  static constexpr size_t kProviderField = 32;
  /// Bytes encode() writes.
  size_t size() const;
  /// Writes size() bytes to out.
  void encode(uint8_t* out) const;
  /// Reads a blob of len bytes; throws Error(PB_ERR_INVALID) naming `from`
  /// ("rank 3 (host h)") when it is short, has a bad magic or version, or
  /// its name lengths or lane count disagree with len.
  static AddressBlob decode(const uint8_t* in, size_t len, const std::string& from);
};

/// PackedRkey::flags bit: the region is host memory (the target's CPU may
/// store a WRITE_SIGNAL message's payload into it). 0 from older plugins.
constexpr uint16_t kRkeyHostMemory = 1;

/// pack_rkey()'s blob. 64 + 8 x lanes bytes: magic u32 | version u16 |
/// flags u16 | region u64 | check u64 | mr_key u64 | base u64 | size u64 |
/// rma_base u64 | lanes u16 | 6 zero bytes | the region's key on each lane u64.
/// region and check (random) name the region for signals applied by the
/// target (control messages); mr_key and rma_base are what fi_write and
/// fi_atomic need: the remote address of offset o is rma_base + o, where
/// rma_base is the region's virtual address under FI_MR_VIRT_ADDR and 0
/// otherwise. base is the virtual address (for alignment checks).
struct PackedRkey {
  uint32_t magic = kRkeyMagic;
  uint16_t version = kVersion;
  uint16_t flags = 0;  ///< kRkeyHostMemory.
  uint64_t region = 0;
  uint64_t check = 0;
  uint64_t mrKey = 0;
  uint64_t base = 0;
  uint64_t size = 0;
  uint64_t rmaBase = 0;
  std::vector<uint64_t> laneKeys;  ///< At most kMaxLanes.

  static constexpr size_t kHeaderSize = 64;
  /// Bytes encode() writes.
  size_t wireSize() const { return kHeaderSize + 8 * laneKeys.size(); }
  /// Writes wireSize() bytes to out.
  void encode(uint8_t* out) const;
  /// Reads the wire form of len bytes (at least kHeaderSize; the caller
  /// checks magic and version); throws Error(PB_ERR_INVALID) when its lane
  /// count exceeds kMaxLanes or disagrees with len.
  static PackedRkey decode(const uint8_t* in, size_t len);
};

/// Kinds of control message.
enum class MessageType : uint16_t {
  Hello = 1,   ///< Connection set-up: "rank from_rank's connection from_conn reaches your to_conn".
  Signal = 2,  ///< Add value to the u64 at (region, check) + offset, after every earlier write landed.
  WriteSignal = 3,  ///< A WriteExt and its payload follow: store the payload, then add as Signal does.
  LaneWake = 4      ///< value bytes are on their way over the lanes: keep them progressing (README "Lanes").
};

/// A control message, sent with fi_send into buffers the target posted.
/// 64 bytes: magic u32 | version u16 | type u16 | from_rank i32 | to_rank i32 |
/// to_conn u64 | from_conn u64 | region u64 | check u64 | offset u64 | value u64.
struct Message {
  uint32_t magic = kMessageMagic;
  uint16_t version = kVersion;
  uint16_t type = 0;
  int32_t fromRank = -1;
  int32_t toRank = -1;
  uint64_t toConn = 0;
  uint64_t fromConn = 0;
  uint64_t region = 0;
  uint64_t check = 0;
  uint64_t offset = 0;
  uint64_t value = 0;

  static constexpr size_t kSize = 64;
  /// Writes the 64-byte wire form to out.
  void encode(uint8_t* out) const;
  /// Reads the wire form; the caller has checked the length.
  static Message decode(const uint8_t* in);
};

/// What follows a WRITE_SIGNAL message's 64 bytes, before its payload.
/// 32 bytes: region u64 | check u64 | offset u64 | length u64 (the write's
/// target and the payload's size).
struct WriteExt {
  uint64_t region = 0;
  uint64_t check = 0;
  uint64_t offset = 0;
  uint64_t length = 0;

  static constexpr size_t kSize = 32;
  /// Writes the 32-byte wire form to out.
  void encode(uint8_t* out) const;
  /// Reads the wire form; the caller has checked the length.
  static WriteExt decode(const uint8_t* in);
};

/// Size of every control-message buffer (send slots, posted receives): a
/// WRITE_SIGNAL message carries a 32 KiB write, a 64-byte header in front
/// of it (the core's host collectives put one before each chunk's data)
/// and both message headers. Few large messages beat many small ones over
/// tcp;ofi_rxm: each further message of one write cost 25-45 us on the
/// 2-core VM (README "Operations"). Version 1 capped messages at 16 KiB,
/// version 2 at 32 KiB + 128 (so a 32 KiB chunk with its header took two).
constexpr size_t kMessageBytes = 32 * 1024 + 256;
/// The largest payload a WRITE_SIGNAL message carries; larger writes go by
/// RMA with the signal after them.
constexpr size_t kInlineWriteMax = kMessageBytes - Message::kSize - WriteExt::kSize;
static_assert(kInlineWriteMax >= 32 * 1024 + 64, "a 32 KiB write with a 64-byte header must fit one message");

}  // namespace plugboard::libfabric::wire
