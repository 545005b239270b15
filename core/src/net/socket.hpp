// TCP socket helpers shared by the bootstrap and the socket-based transport
// plugins. Built as a static, hidden-visibility library so each plugin gets
// its own private copy and exports nothing of it.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace plugboard::net {

/// What went wrong in a socket operation. Unacknowledged: the kernel gave
/// up on a connection whose data the peer did not acknowledge within the
/// socket's user timeout (setUserTimeout; ETIMEDOUT, or the routing error
/// the retransmissions last met: EHOSTUNREACH, ENETUNREACH, EHOSTDOWN,
/// ENETDOWN): the link or the peer's host is down, though nothing said so.
enum class NetErrorKind { Timeout, Closed, System, Invalid, Unacknowledged };

/// Error thrown by every function here; callers map it to their own errors.
class NetError : public std::runtime_error {
 public:
  NetError(NetErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  NetErrorKind kind() const noexcept { return kind_; }

 private:
  NetErrorKind kind_;
};

/// A point in time after which waits give up.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  /// A deadline `timeout` from now; a negative timeout never expires.
  static Deadline after(std::chrono::milliseconds timeout);
  /// A deadline that never expires.
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  /// Milliseconds left, clamped to [0, INT32_MAX]; for poll().
  int remainingMs() const;
  /// True once the deadline has passed.
  bool expired() const { return Clock::now() >= at_; }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

/// An IPv4 or IPv6 socket address.
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t length = 0;

  /// Parses "host:port", "[v6addr]:port" or "host" (port 0). Resolves names.
  static SockAddr parse(const std::string& text);
  /// "a.b.c.d:port" or "[v6]:port".
  std::string str() const;
  /// Port in host byte order.
  uint16_t port() const;
  /// Sets the port.
  void setPort(uint16_t port);
  /// The address family (AF_INET or AF_INET6).
  int family() const { return storage.ss_family; }
  /// True for 127.0.0.0/8 and ::1.
  bool isLoopback() const;
};

/// A network interface with one address.
struct Interface {
  std::string name;
  SockAddr address;
  bool loopback = false;
};

/// Every interface that is up and has an IPv4 or global IPv6 address.
std::vector<Interface> listInterfaces();

/// Filters interfaces by an NCCL_SOCKET_IFNAME-style spec: comma-separated
/// prefixes; a leading '^' excludes the listed ones; a leading '=' (after '^'
/// if any) makes matches exact. An empty spec selects every non-loopback
/// interface, or loopback when there is no other.
std::vector<Interface> selectInterfaces(const std::vector<Interface>& all, const std::string& spec);

/// An owned socket file descriptor, closed on destruction.
class Socket {
 public:
  Socket() = default;
  /// Takes ownership of fd.
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  /// Listens on addr (port 0: any free port) with SO_REUSEADDR.
  static Socket listenOn(const SockAddr& addr, int backlog = 128);
  /// Connects, retrying refused or unreachable attempts until the deadline.
  static Socket connectTo(const SockAddr& addr, Deadline deadline);
  /// Starts a non-blocking connect; finish it with connectFinished().
  static Socket beginConnect(const SockAddr& addr);
  /// Same, with SO_SNDBUF/SO_RCVBUF set to bufferBytes before connecting (so
  /// the TCP window scale fits); 0 keeps the system default.
  static Socket beginConnect(const SockAddr& addr, int bufferBytes);
  /// True once a beginConnect() completed; throws NetError if it failed
  /// (Invalid: refused, the caller may retry with a new socket).
  bool connectFinished();
  /// Accepts one connection, waiting until the deadline.
  Socket acceptOne(Deadline deadline);
  /// Non-blocking accept: an invalid Socket if none is pending.
  Socket tryAccept();

  /// Sends all bytes, waiting for buffer space until the deadline.
  void sendAll(const void* data, size_t size, Deadline deadline);
  /// Receives exactly size bytes; throws Closed on orderly shutdown.
  void recvAll(void* data, size_t size, Deadline deadline);
  /// Waits until readable; false at the deadline.
  bool waitReadable(Deadline deadline);
  /// Waits until there is send buffer space; false at the deadline.
  bool waitWritable(Deadline deadline);
  /// Sends every byte of the count buffers in iov (one sendmsg per wakeup,
  /// no copy), waiting for buffer space until the deadline. Throws Closed on
  /// EPIPE/ECONNRESET, Unacknowledged when
  /// unacknowledged data timed out, Timeout at the deadline.
  void sendAllV(const iovec* iov, size_t count, Deadline deadline);
  /// Non-blocking send: bytes accepted now (0 when the buffer is full).
  /// Throws Closed on EPIPE/ECONNRESET, Unacknowledged when unacknowledged
  /// data timed out.
  size_t sendSome(const void* data, size_t size);
  /// Non-blocking gather send (one sendmsg): bytes accepted now, 0 when the
  /// buffer is full. Throws Closed on EPIPE/ECONNRESET, Unacknowledged when
  /// unacknowledged data timed out.
  size_t sendSomeV(const iovec* iov, size_t count);
  /// Non-blocking receive: bytes read now (0 when none are pending). Throws
  /// Closed on orderly shutdown or reset, Unacknowledged when
  /// unacknowledged data timed out.
  size_t recvSome(void* data, size_t size);

  /// The error the kernel recorded on the socket (SO_ERROR, which clears
  /// it), as the NetError a send would have thrown; nullopt when none.
  std::optional<NetError> takeError() const;

  /// The locally bound address.
  SockAddr localAddress() const;
  /// Disables Nagle's algorithm.
  void setNoDelay();
  /// Asks the kernel to delay the acknowledgements of what was read
  /// (TCP_QUICKACK off): a receive-only stream then acknowledges about
  /// every second pushed segment instead of each one, so a sender of small
  /// frames gets about half the segments to process. Linux leaves that
  /// mode on its own (its delayed-ACK timer), so a reader calls this after
  /// each read that returned data. Best effort: errors are ignored.
  void delayAcks();
  /// Undoes delayAcks() (TCP_QUICKACK on; a pending acknowledgement goes
  /// now): for bulk data, whose sender needs them to keep its window open.
  void quickAcks();
  /// Switches O_NONBLOCK on or off.
  void setNonBlocking(bool on);
  /// Sets SO_SNDBUF/SO_RCVBUF (0 keeps the system default).
  void setBufferSizes(int bytes);
  /// TCP_USER_TIMEOUT: once data sent stays unacknowledged this long, the
  /// kernel drops the connection and the next send or receive throws
  /// Unacknowledged (a peer that merely stops reading still acknowledges
  /// its zero-window probes, so it is not cut). 0 keeps the system's
  /// retransmission limit (tcp_retries2, about 15 minutes).
  void setUserTimeout(std::chrono::milliseconds timeout);
  /// shutdown(SHUT_RDWR): wakes a thread blocked on this socket.
  void shutdownBoth();

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Gives up ownership and returns the descriptor.
  int release() { int f = fd_; fd_ = -1; return f; }

 private:
  int fd_ = -1;
};

/// What waitReadableOrFailed() saw.
struct Readiness {
  bool readable = false;  ///< `readable` has bytes (or its end) to read.
  int failed = -1;        ///< Index in `watched` of a socket with an error or hang-up; -1: none.
};

/// Waits until `readable` is readable or one of `watched` reports an error
/// or hang-up, until the deadline. Lets the thread that reads one socket
/// notice a failure of those it only writes, e.g. data left unacknowledged
/// past the user timeout.
Readiness waitReadableOrFailed(const Socket& readable, const std::vector<const Socket*>& watched, Deadline deadline);

/// "strerror(errno)" with the errno name, for messages.
std::string errnoText(int err);

}  // namespace plugboard::net
