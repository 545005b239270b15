#include "net/socket.hpp"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <thread>

namespace plugboard::net {

std::string errnoText(int err) {
  char buf[128];
  return std::string(strerror_r(err, buf, sizeof(buf))) + " (errno " + std::to_string(err) + ")";
}

namespace {

[[noreturn]] void throwSys(const std::string& what, int err) {
  throw NetError(NetErrorKind::System, what + ": " + errnoText(err));
}

/// The error of a send or receive on a connected socket that failed with err.
NetError transferError(const char* call, int err) {
  if (err == EPIPE || err == ECONNRESET)
    return NetError(NetErrorKind::Closed, "connection closed by peer (" + errnoText(err) + ")");
  // On an established connection the kernel keeps routing and ICMP errors
  // as soft errors and reports the last one instead of ETIMEDOUT when the
  // retransmissions give up: a local link taken down ends in EHOSTUNREACH
  // or ENETUNREACH, not ETIMEDOUT.
  if (err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN || err == ENETDOWN)
    return NetError(NetErrorKind::Unacknowledged,
                    std::string(call) + ": sent data went unacknowledged past the socket's user timeout (" +
                        (err == ETIMEDOUT ? "" : "its last retransmission met: ") + errnoText(err) + ")");
  return NetError(NetErrorKind::System, std::string(call) + ": " + errnoText(err));
}

[[noreturn]] void throwTransferError(const char* call, int err) { throw transferError(call, err); }

bool pollFor(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.remainingMs());
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throwSys("poll", errno);
  }
}

}  // namespace

// ---- Deadline --------------------------------------------------------------

Deadline Deadline::after(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) return never();
  return Deadline(Clock::now() + timeout);
}

int Deadline::remainingMs() const {
  if (at_ == Clock::time_point::max()) return INT_MAX;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

// ---- SockAddr --------------------------------------------------------------

SockAddr SockAddr::parse(const std::string& text) {
  std::string host = text, port = "0";
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) throw NetError(NetErrorKind::Invalid, "address '" + text + "' lacks ']'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') throw NetError(NetErrorKind::Invalid, "address '" + text + "': expected ':' after ']'");
      port = text.substr(close + 2);
    }
  } else if (size_t colon = text.rfind(':'); colon != std::string::npos && text.find(':') == colon) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long portNum = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || portNum < 0 || portNum > 65535)
    throw NetError(NetErrorKind::Invalid, "address '" + text + "': port '" + port + "' is not 0-65535");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res)
    throw NetError(NetErrorKind::Invalid, "address '" + text + "': cannot resolve '" + host + "': " + gai_strerror(rc));
  SockAddr out;
  // Prefer IPv4 when a name resolves to both.
  addrinfo* pick = res;
  for (addrinfo* p = res; p; p = p->ai_next) if (p->ai_family == AF_INET) { pick = p; break; }
  memcpy(&out.storage, pick->ai_addr, pick->ai_addrlen);
  out.length = pick->ai_addrlen;
  freeaddrinfo(res);
  out.setPort(static_cast<uint16_t>(portNum));
  return out;
}

std::string SockAddr::str() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (family() == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(port());
  }
  return "<no address>";
}

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SockAddr::setPort(uint16_t p) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(p);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(p);
}

bool SockAddr::isLoopback() const {
  if (family() == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr);
  return false;
}

// ---- interfaces ------------------------------------------------------------

std::vector<Interface> listInterfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throwSys("getifaddrs", errno);
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    Interface itf;
    itf.name = i->ifa_name;
    itf.address.length = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&itf.address.storage, i->ifa_addr, itf.address.length);
    if (fam == AF_INET6) {
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&itf.address.storage);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;  // needs a scope id; skip
    }
    itf.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    itf.address.setPort(0);
    out.push_back(itf);
  }
  freeifaddrs(list);
  // IPv4 first: stable, predictable choice.
  std::stable_sort(out.begin(), out.end(), [](const Interface& a, const Interface& b) {
    return a.address.family() == AF_INET && b.address.family() != AF_INET;
  });
  return out;
}

std::vector<Interface> selectInterfaces(const std::vector<Interface>& all, const std::string& spec) {
  if (spec.empty()) {
    std::vector<Interface> out;
    for (const auto& i : all) if (!i.loopback) out.push_back(i);
    if (out.empty()) for (const auto& i : all) if (i.loopback) out.push_back(i);
    return out;
  }
  std::string list = spec;
  bool exclude = false, exact = false;
  if (!list.empty() && list[0] == '^') { exclude = true; list.erase(0, 1); }
  if (!list.empty() && list[0] == '=') { exact = true; list.erase(0, 1); }
  std::vector<std::string> names;
  for (size_t start = 0;;) {
    size_t comma = list.find(',', start);
    std::string n = list.substr(start, comma - start);
    if (!n.empty()) names.push_back(n);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::vector<Interface> out;
  for (const auto& i : all) {
    bool match = false;
    for (const auto& n : names)
      match = match || (exact ? i.name == n : i.name.compare(0, n.size(), n) == 0);
    if (match != exclude) out.push_back(i);
  }
  return out;
}

// ---- Socket ----------------------------------------------------------------

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Socket Socket::listenOn(const SockAddr& addr, int backlog) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throwSys("socket", errno);
  int one = 1;
  setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.fd_, reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0)
    throwSys("bind to " + addr.str(), errno);
  if (::listen(s.fd_, backlog) != 0) throwSys("listen on " + addr.str(), errno);
  return s;
}

Socket Socket::beginConnect(const SockAddr& addr) { return beginConnect(addr, 0); }

Socket Socket::beginConnect(const SockAddr& addr, int bufferBytes) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) throwSys("socket", errno);
  s.setBufferSizes(bufferBytes);
  int rc = ::connect(s.fd_, reinterpret_cast<const sockaddr*>(&addr.storage), addr.length);
  if (rc != 0 && errno != EINPROGRESS) {
    int err = errno;
    if (err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH)
      throw NetError(NetErrorKind::Invalid, "connect to " + addr.str() + ": " + errnoText(err));
    throwSys("connect to " + addr.str(), err);
  }
  return s;
}

bool Socket::connectFinished() {
  pollfd p{fd_, POLLOUT, 0};
  int rc = ::poll(&p, 1, 0);
  if (rc < 0 && errno != EINTR) throwSys("poll", errno);
  if (rc <= 0) return false;
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err == 0) return true;
  if (err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH || err == ETIMEDOUT)
    throw NetError(NetErrorKind::Invalid, "connect: " + errnoText(err));
  throwSys("connect", err);
}

Socket Socket::connectTo(const SockAddr& addr, Deadline deadline) {
  std::string lastError = "no attempt made";
  do {
    try {
      Socket s = beginConnect(addr);
      while (!s.connectFinished()) {
        if (!pollFor(s.fd_, POLLOUT, deadline)) break;
      }
      if (s.connectFinished()) {
        s.setNonBlocking(false);
        return s;
      }
      lastError = "connect did not complete";
    } catch (const NetError& e) {
      if (e.kind() != NetErrorKind::Invalid) throw;
      lastError = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (!deadline.expired());
  throw NetError(NetErrorKind::Timeout, "connect to " + addr.str() + " timed out (" + lastError + ")");
}

Socket Socket::acceptOne(Deadline deadline) {
  for (;;) {
    if (!pollFor(fd_, POLLIN, deadline))
      throw NetError(NetErrorKind::Timeout, "accept on " + localAddress().str() + " timed out");
    Socket s = tryAccept();
    if (s.valid()) return s;
  }
}

Socket Socket::tryAccept() {
  int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return Socket();
    throwSys("accept", errno);
  }
  Socket s(fd);
  s.setNonBlocking(false);
  return s;
}

void Socket::sendAll(const void* data, size_t size, Deadline deadline) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) { p += n; size -= static_cast<size_t>(n); continue; }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!pollFor(fd_, POLLOUT, deadline)) throw NetError(NetErrorKind::Timeout, "send timed out");
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    throwTransferError("send", errno);
  }
}

void Socket::recvAll(void* data, size_t size, Deadline deadline) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd_, p, size, MSG_DONTWAIT);
    if (n > 0) { p += n; size -= static_cast<size_t>(n); continue; }
    if (n == 0) throw NetError(NetErrorKind::Closed, "connection closed by peer");
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!pollFor(fd_, POLLIN, deadline)) throw NetError(NetErrorKind::Timeout, "receive timed out");
      continue;
    }
    if (errno == EINTR) continue;
    throwTransferError("recv", errno);
  }
}

bool Socket::waitReadable(Deadline deadline) { return pollFor(fd_, POLLIN, deadline); }

bool Socket::waitWritable(Deadline deadline) { return pollFor(fd_, POLLOUT, deadline); }

size_t Socket::sendSomeV(const iovec* iov, size_t count) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = count;
  for (;;) {
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return 0;
    throwTransferError("sendmsg", err);
  }
}

void Socket::sendAllV(const iovec* iov, size_t count, Deadline deadline) {
  std::vector<iovec> left(iov, iov + count);
  size_t first = 0;
  while (first < left.size()) {
    if (left[first].iov_len == 0) { ++first; continue; }
    msghdr msg{};
    msg.msg_iov = &left[first];
    msg.msg_iovlen = std::min<size_t>(left.size() - first, IOV_MAX);
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) {
        if (!pollFor(fd_, POLLOUT, deadline)) throw NetError(NetErrorKind::Timeout, "send timed out");
        continue;
      }
      throwTransferError("sendmsg", err);
    }
    // Advance past what the kernel took: whole buffers, then part of one.
    for (size_t done = static_cast<size_t>(n); done > 0 && first < left.size(); ++first) {
      if (done < left[first].iov_len) {
        left[first].iov_base = static_cast<char*>(left[first].iov_base) + done;
        left[first].iov_len -= done;
        break;
      }
      done -= left[first].iov_len;
    }
  }
}

size_t Socket::sendSome(const void* data, size_t size) {
  for (;;) {
    ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return 0;
    throwTransferError("send", err);
  }
}

size_t Socket::recvSome(void* data, size_t size) {
  if (size == 0) return 0;
  for (;;) {
    ssize_t n = ::recv(fd_, data, size, MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) throw NetError(NetErrorKind::Closed, "connection closed by peer");
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return 0;
    throwTransferError("recv", err);
  }
}

SockAddr Socket::localAddress() const {
  SockAddr a;
  a.length = sizeof(a.storage);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) throwSys("getsockname", errno);
  return a;
}

void Socket::setNoDelay() {
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void Socket::delayAcks() {
  int zero = 0;
  setsockopt(fd_, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof(zero));
}

void Socket::quickAcks() {
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

void Socket::setNonBlocking(bool on) {
  int flags = fcntl(fd_, F_GETFL, 0);
  if (flags < 0) throwSys("fcntl(F_GETFL)", errno);
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd_, F_SETFL, flags) != 0) throwSys("fcntl(F_SETFL)", errno);
}

void Socket::setBufferSizes(int bytes) {
  if (bytes <= 0) return;
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

void Socket::setUserTimeout(std::chrono::milliseconds timeout) {
  const auto ms = static_cast<unsigned>(std::clamp<int64_t>(timeout.count(), 0, INT32_MAX));
  if (setsockopt(fd_, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms)) != 0) throwSys("setsockopt(TCP_USER_TIMEOUT)", errno);
}

std::optional<NetError> Socket::takeError() const {
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) throwSys("getsockopt(SO_ERROR)", errno);
  if (err == 0) return std::nullopt;
  return transferError("pending socket error", err);
}

Readiness waitReadableOrFailed(const Socket& readable, const std::vector<const Socket*>& watched, Deadline deadline) {
  // No events asked of the watched sockets: poll reports POLLERR and POLLHUP anyway.
  std::vector<pollfd> p(1 + watched.size());
  p[0] = {readable.fd(), POLLIN, 0};
  for (size_t i = 0; i < watched.size(); ++i) p[1 + i] = {watched[i]->fd(), 0, 0};
  for (;;) {
    int rc = ::poll(p.data(), p.size(), deadline.remainingMs());
    if (rc >= 0) break;
    if (errno != EINTR) throwSys("poll", errno);
  }
  Readiness r;
  r.readable = (p[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0;
  for (size_t i = 0; i < watched.size() && r.failed < 0; ++i)
    if (p[1 + i].revents & (POLLERR | POLLHUP)) r.failed = static_cast<int>(i);
  return r;
}

void Socket::shutdownBoth() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

}  // namespace plugboard::net
