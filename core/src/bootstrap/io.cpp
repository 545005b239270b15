#include "bootstrap/io.hpp"

#include <errno.h>
#include <sys/socket.h>

namespace plugboard::bootstrap {

size_t sendSome(net::Socket& sock, const void* data, size_t size) {
  for (;;) {
    ssize_t n = ::send(sock.fd(), data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == EPIPE || errno == ECONNRESET)
      throw net::NetError(net::NetErrorKind::Closed, "connection closed by peer (" + net::errnoText(errno) + ")");
    throw net::NetError(net::NetErrorKind::System, "send: " + net::errnoText(errno));
  }
}

size_t recvSome(net::Socket& sock, void* data, size_t size) {
  for (;;) {
    ssize_t n = ::recv(sock.fd(), data, size, MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) {
      if (size == 0) return 0;
      throw net::NetError(net::NetErrorKind::Closed, "connection closed by peer");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET) throw net::NetError(net::NetErrorKind::Closed, "connection reset by peer");
    throw net::NetError(net::NetErrorKind::System, "recv: " + net::errnoText(errno));
  }
}

bool pollAny(std::vector<pollfd>& fds, net::Deadline deadline) {
  for (;;) {
    for (auto& p : fds) p.revents = 0;
    int rc = ::poll(fds.data(), fds.size(), deadline.remainingMs());
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw net::NetError(net::NetErrorKind::System, "poll: " + net::errnoText(errno));
  }
}

std::string peerAddressText(const net::Socket& sock) {
  net::SockAddr a;
  a.length = sizeof(a.storage);
  if (getpeername(sock.fd(), reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) return "?";
  return a.str();
}

}  // namespace plugboard::bootstrap
