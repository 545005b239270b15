#include "channel.hpp"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "timing.hpp"

namespace plugboard::check {

Encoder& Encoder::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) out_.push_back(char(uint8_t(v >> (8 * i))));
  return *this;
}

Encoder& Encoder::bytes(const void* data, size_t size) {
  u64(size);
  out_.append(static_cast<const char*>(data), size);
  return *this;
}

uint64_t Decoder::u64() {
  if (in_.size() - pos_ < 8) throw CheckFailed("malformed message between checker and peer (short u64)");
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(in_[pos_ + i])) << (8 * i);
  pos_ += 8;
  return v;
}

std::string Decoder::bytes() {
  uint64_t n = u64();
  if (in_.size() - pos_ < n) throw CheckFailed("malformed message between checker and peer (short bytes)");
  std::string s = in_.substr(pos_, n);
  pos_ += n;
  return s;
}

std::string encode(const VerifyRequest& v) {
  Encoder e;
  e.u64(v.buffer).u64(v.offset).u64(v.length).u64(v.patternStart).u64(v.seed).u64(v.fill);
  e.u64(v.counterBuffer).u64(v.counterOffset).u64(v.counterValue).u64(v.expectNotify);
  return e.str();
}

VerifyRequest decodeVerify(const std::string& body) {
  Decoder d(body);
  VerifyRequest v;
  v.buffer = d.u64();
  v.offset = d.u64();
  v.length = d.u64();
  v.patternStart = d.u64();
  v.seed = d.u64();
  v.fill = d.u64();
  v.counterBuffer = d.u64();
  v.counterOffset = d.u64();
  v.counterValue = d.u64();
  v.expectNotify = d.u64();
  return v;
}

Channel::~Channel() {
  if (fd_ >= 0) close(fd_);
}

void Channel::send(Msg type, const std::string& body) {
  Encoder header;
  header.u64(uint64_t(type)).u64(body.size());
  std::string frame = header.str() + body;
  size_t done = 0;
  while (done < frame.size()) {
    ssize_t n = ::send(fd_, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw CheckFailed(std::string("cannot reach the peer process: ") + std::strerror(errno));
    done += size_t(n);
  }
}

void Channel::readExactly(void* p, size_t n) {
  auto* out = static_cast<char*>(p);
  while (n > 0) {
    ssize_t got = ::recv(fd_, out, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) throw CheckFailed("the peer process went away (it exited or crashed; see its stderr)");
    if (got < 0) throw CheckFailed(std::string("reading from the peer process: ") + std::strerror(errno));
    out += got;
    n -= size_t(got);
  }
}

bool Channel::tryReceive(Message* m, double seconds) {
  pollfd p{fd_, POLLIN, 0};
  int ready = ::poll(&p, 1, int(seconds * 1000));
  if (ready < 0 && errno != EINTR) throw CheckFailed(std::string("poll: ") + std::strerror(errno));
  if (ready <= 0) return false;
  uint8_t header[16];
  readExactly(header, sizeof(header));
  std::string raw(reinterpret_cast<char*>(header), sizeof(header));
  Decoder d(raw);
  m->type = Msg(d.u64());
  m->body.resize(d.u64());
  readExactly(m->body.data(), m->body.size());
  return true;
}

Message Channel::receive(double seconds, const std::function<void()>& pump) {
  Deadline deadline(seconds);
  Message m;
  while (!tryReceive(&m, pump ? 0.001 : 0.05)) {
    if (deadline.expired())
      throw CheckFailed("the peer process did not answer within " + std::to_string(int(seconds)) + " s");
    if (pump) pump();
  }
  return m;
}

Message Channel::expectReply(Msg type, const std::string& what, double seconds, const std::function<void()>& pump) {
  Message m = receive(seconds, pump);
  if (m.type == Msg::Error) throw CheckFailed(what + ": " + m.body);
  if (m.type != type)
    throw CheckFailed(what + ": the peer process answered message type " + std::to_string(uint32_t(m.type)) +
                      ", expected " + std::to_string(uint32_t(type)));
  return m;
}

}  // namespace plugboard::check
