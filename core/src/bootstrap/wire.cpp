#include "bootstrap/wire.hpp"

#include <cstring>

namespace plugboard::bootstrap {

// ---- ByteWriter / ByteReader -------------------------------------------------

void ByteWriter::put(uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void ByteWriter::bytes(const void* data, size_t size) {
  auto* p = static_cast<const uint8_t*>(data);
  out_.insert(out_.end(), p, p + size);
}

void ByteWriter::address(const net::SockAddr& addr) {
  uint8_t raw[16] = {0};
  uint16_t tag = 0;
  if (addr.family() == AF_INET) {
    tag = 4;
    memcpy(raw, &reinterpret_cast<const sockaddr_in*>(&addr.storage)->sin_addr, 4);
  } else if (addr.family() == AF_INET6) {
    tag = 6;
    memcpy(raw, &reinterpret_cast<const sockaddr_in6*>(&addr.storage)->sin6_addr, 16);
  }
  u16(tag);
  u16(addr.port());
  bytes(raw, sizeof(raw));
}

uint64_t ByteReader::get(int n) {
  if (left_ < static_cast<size_t>(n)) {
    ok_ = false;
    left_ = 0;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
  p_ += n;
  left_ -= static_cast<size_t>(n);
  return v;
}

void ByteReader::bytes(void* out, size_t size) {
  if (left_ < size) {
    ok_ = false;
    left_ = 0;
    memset(out, 0, size);
    return;
  }
  memcpy(out, p_, size);
  p_ += size;
  left_ -= size;
}

net::SockAddr ByteReader::address() {
  uint16_t tag = u16();
  uint16_t port = u16();
  uint8_t raw[16];
  bytes(raw, sizeof(raw));
  net::SockAddr a;
  if (tag == 4) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
    in->sin_family = AF_INET;
    memcpy(&in->sin_addr, raw, 4);
    a.length = sizeof(sockaddr_in);
  } else if (tag == 6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    in6->sin6_family = AF_INET6;
    memcpy(&in6->sin6_addr, raw, 16);
    a.length = sizeof(sockaddr_in6);
  } else {
    ok_ = false;
    return a;
  }
  a.setPort(port);
  return a;
}

// ---- Hello -------------------------------------------------------------------

std::array<uint8_t, kHelloBytes> encodeHello(const Hello& h) {
  std::vector<uint8_t> buf;
  ByteWriter w(buf);
  w.u32(kHelloMagic);
  w.u16(kWireVersion);
  w.u16(static_cast<uint16_t>(h.kind));
  w.u64(h.nonce);
  w.u32(static_cast<uint32_t>(h.rank));
  w.u32(static_cast<uint32_t>(h.nranks));
  w.address(h.listen);
  std::array<uint8_t, kHelloBytes> out{};
  memcpy(out.data(), buf.data(), buf.size());
  return out;
}

bool decodeHello(const uint8_t* bytes, Hello& out) {
  ByteReader r(bytes, kHelloBytes);
  if (r.u32() != kHelloMagic || r.u16() != kWireVersion) return false;
  uint16_t kind = r.u16();
  if (kind != static_cast<uint16_t>(HelloKind::Join) && kind != static_cast<uint16_t>(HelloKind::Peer))
    return false;
  out.kind = static_cast<HelloKind>(kind);
  out.nonce = r.u64();
  out.rank = static_cast<int32_t>(r.u32());
  out.nranks = static_cast<int32_t>(r.u32());
  net::SockAddr listen = r.address();
  if (out.kind == HelloKind::Join) out.listen = listen;
  if (out.kind == HelloKind::Join && !r.ok()) return false;
  // Only the form encodeHello writes: bytes it leaves zero (a peer hello's
  // address, an IPv4 address's tail, the padding) must be zero.
  return std::memcmp(encodeHello(out).data(), bytes, kHelloBytes) == 0;
}

// ---- Reply -------------------------------------------------------------------

std::array<uint8_t, kReplyHeaderBytes> encodeReplyHeader(const ReplyHeader& h) {
  std::vector<uint8_t> buf;
  ByteWriter w(buf);
  w.u32(kReplyMagic);
  w.u32(h.status);
  w.u32(h.size);
  std::array<uint8_t, kReplyHeaderBytes> out{};
  memcpy(out.data(), buf.data(), buf.size());
  return out;
}

bool decodeReplyHeader(const uint8_t* bytes, ReplyHeader& out) {
  ByteReader r(bytes, kReplyHeaderBytes);
  if (r.u32() != kReplyMagic) return false;
  out.status = r.u32();
  out.size = r.u32();
  return true;
}

std::vector<uint8_t> encodeAddressTable(const std::vector<net::SockAddr>& table) {
  std::vector<uint8_t> buf;
  ByteWriter w(buf);
  for (const auto& a : table) w.address(a);
  return buf;
}

bool decodeAddressTable(const std::vector<uint8_t>& payload, int nranks,
                        std::vector<net::SockAddr>& out) {
  if (payload.size() != static_cast<size_t>(nranks) * 20) return false;
  ByteReader r(payload.data(), payload.size());
  out.clear();
  for (int i = 0; i < nranks; ++i) out.push_back(r.address());
  return r.ok();
}

// ---- Frame -------------------------------------------------------------------

std::array<uint8_t, kFrameHeaderBytes> encodeFrameHeader(const FrameHeader& h) {
  std::vector<uint8_t> buf;
  ByteWriter w(buf);
  w.u32(h.magic);
  w.u32(h.space);
  w.u32(static_cast<uint32_t>(h.tag));
  w.u32(0);
  w.u64(h.size);
  std::array<uint8_t, kFrameHeaderBytes> out{};
  memcpy(out.data(), buf.data(), buf.size());
  return out;
}

FrameHeader decodeFrameHeader(const uint8_t* bytes) {
  ByteReader r(bytes, kFrameHeaderBytes);
  FrameHeader h;
  h.magic = r.u32();
  h.space = r.u32();
  h.tag = static_cast<int32_t>(r.u32());
  r.u32();
  h.size = r.u64();
  return h;
}

}  // namespace plugboard::bootstrap
