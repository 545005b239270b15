// Length-prefixed binary encoding for the set-up messages ranks exchange.
// The reader checks every length, so a malformed or hostile message becomes
// an Error(Remote) naming its sender, never a crash.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "plugboard/error.hpp"

namespace plugboard {

/// Appends fixed-size integers and length-prefixed strings/blobs.
class BlobWriter {
 public:
  /// Appends a 64-bit integer (host byte order: all ranks share one ABI).
  void u64(uint64_t v) { raw(&v, sizeof(v)); }
  /// Appends a signed 32-bit integer.
  void i32(int32_t v) { raw(&v, sizeof(v)); }
  /// Appends a length-prefixed string.
  void str(const std::string& s) { bytes(s.data(), s.size()); }
  /// Appends a length-prefixed blob.
  void bytes(const void* p, size_t n) { u64(n); raw(p, n); }
  /// The encoded message.
  const std::vector<char>& data() const { return out_; }

 private:
  void raw(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    out_.insert(out_.end(), c, c + n);
  }
  std::vector<char> out_;
};

/// Reads what BlobWriter wrote; throws Error(Remote) "<from>: malformed ..." on overrun.
class BlobReader {
 public:
  /// from names the sender for messages, e.g. "rank 3".
  BlobReader(const std::vector<char>& data, std::string from) : data_(data), from_(std::move(from)) {}
  uint64_t u64() { uint64_t v; raw(&v, sizeof(v)); return v; }
  int32_t i32() { int32_t v; raw(&v, sizeof(v)); return v; }
  std::string str() { size_t n = length(); std::string s(n, '\0'); raw(s.data(), n); return s; }
  std::vector<char> bytes() { size_t n = length(); std::vector<char> b(n); raw(b.data(), n); return b; }
  /// A count of items that must each take at least one byte: bounded by what is left.
  size_t count() { return length(); }
  /// True when everything was read.
  bool done() const { return pos_ == data_.size(); }

 private:
  size_t length() {
    uint64_t n = u64();
    if (n > data_.size() - pos_) fail("length " + std::to_string(n) + " exceeds the message");
    return static_cast<size_t>(n);
  }
  void raw(void* p, size_t n) {
    if (n > data_.size() - pos_) fail("message truncated");
    if (n) std::memcpy(p, data_.data() + pos_, n);
    pos_ += n;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::Remote, "malformed set-up message from " + from_ + ": " + what);
  }
  const std::vector<char>& data_;
  std::string from_;
  size_t pos_ = 0;
};

}  // namespace plugboard
