// Byte layouts the ethernet transport puts on the wire or in blobs the core
// carries between ranks. Every integer is little-endian and every layout has
// a fixed size; the structs below are the decoded forms, pinned by
// static_assert so a field added by mistake is caught at compile time.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace plugboard::ethernet::wire {

/// Format version shared by every layout below; bumped on any change.
constexpr uint32_t kVersion = 2;
/// "PBEA": address blob from setup().
constexpr uint32_t kAddressMagic = 0x41454250;
/// "PBEH": hello sent first on each new socket.
constexpr uint32_t kHelloMagic = 0x48454250;
/// "PBEF": start of every frame on a connected socket.
constexpr uint32_t kFrameMagic = 0x46454250;
/// "PBER": packed remote key.
constexpr uint32_t kRkeyMagic = 0x52454250;

using plugboard::transport_cxx::loadLE;
using plugboard::transport_cxx::storeLE;

/// setup()'s address blob: who listens where. 32 bytes on the wire:
/// magic u32 | version u32 | rank i32 | family u16 (4 or 6) | port u16 |
/// address 16 bytes (network order; IPv4 uses the first 4).
struct AddressBlob {
  uint32_t magic;
  uint32_t version;
  int32_t rank;
  uint16_t family;
  uint16_t port;
  std::array<uint8_t, 16> address;

  static constexpr size_t kSize = 32;
  /// Writes the 32-byte wire form to out.
  void encode(uint8_t* out) const;
  /// Reads the wire form; the caller has checked the length.
  static AddressBlob decode(const uint8_t* in);
};
static_assert(sizeof(AddressBlob) == AddressBlob::kSize, "AddressBlob layout changed");

/// First bytes sent on each outbound socket, so the acceptor knows it is the
/// expected peer and which of the sender's sockets it is. 24 bytes:
/// magic u32 | version u32 | from_rank i32 | to_rank i32 | socket u32 (0:
/// the frame stream, 1..stripes: a stripe socket) | stripes u32 (how many
/// stripe sockets the sender opens; the same on each of its sockets).
struct Hello {
  uint32_t magic;
  uint32_t version;
  int32_t fromRank;
  int32_t toRank;
  uint32_t socket;
  uint32_t stripes;

  static constexpr size_t kSize = 24;
  /// Writes the 16-byte wire form to out.
  void encode(uint8_t* out) const;
  /// Reads the wire form.
  static Hello decode(const uint8_t* in);
};
static_assert(sizeof(Hello) == Hello::kSize, "Hello layout changed");

/// Kinds of frame.
enum class FrameType : uint16_t {
  Write = 1,   ///< length payload bytes follow; store them at region+offset.
  Signal = 2,  ///< Atomically add length (the value) to the u64 at region+offset.
  Close = 3,   ///< Orderly close: the sender posts nothing more.
  WriteSignal = 4,  ///< A Write whose payload is preceded by a SignalExt: apply
                    ///< the write, then the signal it describes.
  Striped = 5,        ///< A Write whose payload travels as one Piece on each
                      ///< stripe socket; no payload on the frame stream.
  StripedSignal = 6,  ///< Striped, preceded by a SignalExt applied once every
                      ///< piece has landed.
  Piece = 7           ///< Stripe sockets only: offset and length are the whole
                      ///< write's; the payload is this socket's piece of it.
};

/// Part of a striped write one stripe socket carries.
struct PieceRange {
  uint64_t offset;  ///< From the start of the write.
  uint64_t length;
};

/// Piece `index` (0-based) of a write of `length` bytes cut over `count`
/// stripe sockets: equal 4 KiB-aligned parts, the last one shorter (a part
/// may be empty when length is small). Both ends compute it.
PieceRange stripePiece(uint64_t length, uint32_t index, uint32_t count);

/// What follows the header of a WriteSignal frame, before its payload.
/// 32 bytes: region u64 | key u64 | offset u64 | value u64.
struct SignalExt {
  uint64_t region;
  uint64_t key;
  uint64_t offset;
  uint64_t value;
  static constexpr size_t kSize = 32;
  /// Writes the 32-byte wire form to out.
  void encode(uint8_t* out) const;
  /// Reads the wire form.
  static SignalExt decode(const uint8_t* in);
};
static_assert(sizeof(SignalExt) == SignalExt::kSize, "SignalExt layout changed");

/// Header of every frame. 48 bytes: magic u32 | type u16 | reserved u16 (0) |
/// seq u64 | region u64 | key u64 | offset u64 | length u64 (payload bytes
/// for Write, the value for Signal, 0 for Close). Write payload follows it.
struct FrameHeader {
  uint32_t magic;
  uint16_t type;
  uint16_t reserved;
  uint64_t seq;
  uint64_t region;
  uint64_t key;
  uint64_t offset;
  uint64_t length;

  static constexpr size_t kSize = 48;
  /// Writes the 48-byte wire form to out.
  void encode(uint8_t* out) const;
  /// Reads the wire form.
  static FrameHeader decode(const uint8_t* in);
};
static_assert(sizeof(FrameHeader) == FrameHeader::kSize, "FrameHeader layout changed");

/// pack_rkey()'s blob. 40 bytes: magic u32 | version u32 | region u64 |
/// key u64 | base u64 | size u64.
struct PackedRkey {
  uint32_t magic;
  uint32_t version;
  uint64_t region;
  uint64_t key;
  uint64_t base;
  uint64_t size;

  static constexpr size_t kSize = 40;
  /// Writes the 40-byte wire form to out.
  void encode(uint8_t* out) const;
  /// Reads the wire form.
  static PackedRkey decode(const uint8_t* in);
};
static_assert(sizeof(PackedRkey) == PackedRkey::kSize, "PackedRkey layout changed");

}  // namespace plugboard::ethernet::wire
