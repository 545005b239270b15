// Byte layouts the bootstrap puts on the wire and in the UniqueId. Every
// integer is little-endian so ranks on any host read the same bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "net/socket.hpp"

namespace plugboard::bootstrap {

constexpr uint32_t kIdMagic = 0x44494250;     // "PBID"
constexpr uint32_t kHelloMagic = 0x4c484250;  // "PBHL"
constexpr uint32_t kReplyMagic = 0x50524250;  // "PBRP"
constexpr uint32_t kFrameMagic = 0x52464250;  // "PBFR"
constexpr uint16_t kWireVersion = 1;
/// Largest payload one frame may carry; bigger sizes mean a corrupt stream.
constexpr uint64_t kMaxFrameBytes = 1ull << 30;

/// Appends little-endian integers and raw bytes to a buffer.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void bytes(const void* data, size_t size);
  /// 20 bytes: family tag (4 or 6), port, 16 address bytes.
  void address(const net::SockAddr& addr);

 private:
  void put(uint64_t v, int n);
  std::vector<uint8_t>& out_;
};

/// Reads what ByteWriter wrote. Reading past the end sets !ok() and yields 0.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  uint16_t u16() { return static_cast<uint16_t>(get(2)); }
  uint32_t u32() { return static_cast<uint32_t>(get(4)); }
  uint64_t u64() { return get(8); }
  void bytes(void* out, size_t size);
  /// An address written by ByteWriter::address; !ok() for an unknown family.
  net::SockAddr address();
  bool ok() const { return ok_; }

 private:
  uint64_t get(int n);
  const uint8_t* p_;
  size_t left_;
  bool ok_ = true;
};

/// Why a connection was opened to a rank's listener.
enum class HelloKind : uint16_t { Join = 1, Peer = 2 };

/// First message on every connection: who is calling, for which job.
struct Hello {
  HelloKind kind = HelloKind::Join;
  uint64_t nonce = 0;
  int32_t rank = -1;
  int32_t nranks = 0;
  net::SockAddr listen;  ///< The sender's listener (Join only).
};
constexpr size_t kHelloBytes = 48;
std::array<uint8_t, kHelloBytes> encodeHello(const Hello& hello);
/// False when the bytes are not a hello of this wire version.
bool decodeHello(const uint8_t* bytes, Hello& out);

/// Root's answer to a Join: the address table, or why the job was aborted.
struct ReplyHeader {
  uint32_t status = 0;  ///< 0: payload is the table; else an ErrorCode + 1.
  uint32_t size = 0;    ///< Payload bytes that follow.
};
constexpr size_t kReplyHeaderBytes = 12;
std::array<uint8_t, kReplyHeaderBytes> encodeReplyHeader(const ReplyHeader& h);
bool decodeReplyHeader(const uint8_t* bytes, ReplyHeader& out);
std::vector<uint8_t> encodeAddressTable(const std::vector<net::SockAddr>& table);
/// False when the payload does not hold exactly nranks addresses.
bool decodeAddressTable(const std::vector<uint8_t>& payload, int nranks,
                        std::vector<net::SockAddr>& out);

/// Header of every point-to-point message. space keeps the collectives'
/// internal traffic apart from user tags.
struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint32_t space = 0;
  int32_t tag = 0;
  uint64_t size = 0;
};
constexpr size_t kFrameHeaderBytes = 24;
std::array<uint8_t, kFrameHeaderBytes> encodeFrameHeader(const FrameHeader& h);
FrameHeader decodeFrameHeader(const uint8_t* bytes);

}  // namespace plugboard::bootstrap
