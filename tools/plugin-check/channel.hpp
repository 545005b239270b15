// Messages between plugboard-plugin-check and its peer process, over a
// socketpair: u32 type, u32 zero, u64 body length, body.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "report.hpp"

namespace plugboard::check {

/// Message types. Requests go to the peer, replies come back.
enum class Msg : uint32_t {
  Connect = 1,  ///< body: our address blob. Replies Address, then Ok/Error when connected.
  Alloc = 2,    ///< body: size, fill byte. Replies Rkey (id, packed key) or Error.
  Verify = 3,   ///< body: VerifyRequest. Replies Ok or Error.
  FreeConn = 4, ///< Free the connection (keys released first). Replies Ok or Error.
  Quit = 5,     ///< Deregister, free, finalize, exit. Replies Ok or Error.
  Ok = 100,     ///< body: optional text.
  Error = 101,  ///< body: the reason.
  Address = 102,///< body: the peer's address blob.
  Rkey = 103    ///< body: buffer id, packed key.
};

/// What the peer checks for Msg::Verify.
struct VerifyRequest {
  uint64_t buffer = 0;        ///< Id from Alloc.
  uint64_t offset = 0;        ///< Where the written bytes start.
  uint64_t length = 0;        ///< How many were written.
  uint64_t patternStart = 0;  ///< Pattern index of the first written byte.
  uint64_t seed = 0;          ///< Pattern seed.
  uint64_t fill = 0;          ///< Every other byte of the buffer must still be this.
  uint64_t counterBuffer = ~0ull; ///< Id of the counter buffer, ~0: no signal (poll the data).
  uint64_t counterOffset = 0; ///< Offset of the uint64_t counter.
  uint64_t counterValue = 0;  ///< Wait until the counter reaches it, then check the data at once.
  uint64_t expectNotify = 0;  ///< 1: signal_landed must have been called since the last reply.
};

/// Builds a message body.
class Encoder {
 public:
  /// Appends a little-endian u64.
  Encoder& u64(uint64_t v);
  /// Appends a length-prefixed byte string.
  Encoder& bytes(const void* data, size_t size);
  /// The body built so far.
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

/// Reads a message body; throws CheckFailed on a short body.
class Decoder {
 public:
  /// Reads from body, which must outlive the decoder.
  explicit Decoder(const std::string& body) : in_(body) {}
  /// Next u64.
  uint64_t u64();
  /// Next length-prefixed byte string.
  std::string bytes();

 private:
  const std::string& in_;
  size_t pos_ = 0;
};

/// Encodes and decodes a VerifyRequest.
std::string encode(const VerifyRequest& v);
/// Inverse of encode().
VerifyRequest decodeVerify(const std::string& body);

/// One received message.
struct Message {
  Msg type = Msg::Ok;
  std::string body;
};

/// A connected socket to the other process. Errors (closed, timed out)
/// throw CheckFailed naming the peer process.
class Channel {
 public:
  /// Takes ownership of fd.
  explicit Channel(int fd) : fd_(fd) {}
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  /// Sends one message (blocking).
  void send(Msg type, const std::string& body = "");
  /// Waits up to seconds for a message, calling pump (if any) about every
  /// millisecond while waiting.
  Message receive(double seconds, const std::function<void()>& pump = {});
  /// Like receive without a pump, but returns false when nothing arrived
  /// within seconds (0: just look).
  bool tryReceive(Message* m, double seconds);
  /// Receives and requires type; an Error reply fails with its text,
  /// prefixed by what.
  Message expectReply(Msg type, const std::string& what, double seconds, const std::function<void()>& pump = {});

 private:
  void readExactly(void* p, size_t n);
  int fd_;
};

}  // namespace plugboard::check
