// net::Socket's failure reporting: the user timeout it sets, and how a
// thread that only reads one socket learns that the socket it writes
// failed (waitReadableOrFailed, takeError). A cut link itself is covered
// by tests/netns/two_hosts.sh, where a link can be taken down.
#include <gtest/gtest.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <utility>

#include "net/socket.hpp"

using namespace plugboard::net;
using namespace std::chrono_literals;

namespace {

/// A connected loopback pair: {the connecting side, the accepted side}.
std::pair<Socket, Socket> connectedPair() {
  Socket listener = Socket::listenOn(SockAddr::parse("127.0.0.1"));
  Socket client = Socket::connectTo(listener.localAddress(), Deadline::after(5000ms));
  Socket server = listener.acceptOne(Deadline::after(5000ms));
  return {std::move(client), std::move(server)};
}

/// Closes s with an RST instead of a FIN (SO_LINGER 0), so its peer's next
/// look at the socket finds ECONNRESET.
void resetClose(Socket& s) {
  linger l{1, 0};
  ASSERT_EQ(setsockopt(s.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof(l)), 0);
  s = Socket();
}

}  // namespace

TEST(Socket, UserTimeoutIsSetInMilliseconds) {
  auto [a, b] = connectedPair();
  a.setUserTimeout(2500ms);
  unsigned value = 0;
  socklen_t len = sizeof(value);
  ASSERT_EQ(getsockopt(a.fd(), IPPROTO_TCP, TCP_USER_TIMEOUT, &value, &len), 0);
  EXPECT_EQ(value, 2500u);
  a.setUserTimeout(0ms);  // back to the system's retransmission limit
  ASSERT_EQ(getsockopt(a.fd(), IPPROTO_TCP, TCP_USER_TIMEOUT, &value, &len), 0);
  EXPECT_EQ(value, 0u);
}

TEST(Socket, AcknowledgementsCanBeDelayedAndMadeQuickAgain) {
  auto [a, b] = connectedPair();
  int quick = -1;
  socklen_t len = sizeof(quick);
  a.delayAcks();  // Linux reads TCP_QUICKACK back as "not in delayed (ping-pong) mode"
  ASSERT_EQ(getsockopt(a.fd(), IPPROTO_TCP, TCP_QUICKACK, &quick, &len), 0);
  EXPECT_EQ(quick, 0);
  a.quickAcks();
  ASSERT_EQ(getsockopt(a.fd(), IPPROTO_TCP, TCP_QUICKACK, &quick, &len), 0);
  EXPECT_EQ(quick, 1);
}

TEST(Socket, WaitSeesDataOnTheReadSocketAndNothingOnAHealthyWatchedOne) {
  auto [readSide, readPeer] = connectedPair();
  auto [writeSide, writePeer] = connectedPair();
  Readiness idle = waitReadableOrFailed(readSide, {&writeSide}, Deadline::after(50ms));
  EXPECT_FALSE(idle.readable);
  EXPECT_EQ(idle.failed, -1);
  const char byte = 'x';
  readPeer.sendAll(&byte, 1, Deadline::after(1000ms));
  Readiness ready = waitReadableOrFailed(readSide, {&writeSide}, Deadline::after(5000ms));
  EXPECT_TRUE(ready.readable);
  EXPECT_EQ(ready.failed, -1);
  EXPECT_FALSE(writeSide.takeError().has_value());
}

TEST(Socket, WaitWakesWhenAWatchedSocketFailsAndTakeErrorSaysHow) {
  auto [readSide, readPeer] = connectedPair();
  auto [healthy, healthyPeer] = connectedPair();
  auto [writeSide, writePeer] = connectedPair();
  resetClose(writePeer);
  Readiness r = waitReadableOrFailed(readSide, {&healthy, &writeSide}, Deadline::after(5000ms));
  EXPECT_FALSE(r.readable);
  EXPECT_EQ(r.failed, 1) << "the second watched socket failed";
  std::optional<NetError> error = writeSide.takeError();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), NetErrorKind::Closed) << error->what();
  EXPECT_FALSE(writeSide.takeError().has_value()) << "SO_ERROR is cleared once taken";
  EXPECT_FALSE(healthy.takeError().has_value());
}

TEST(Socket, WaitWithoutAWatchedSocketOnlyReads) {
  auto [readSide, readPeer] = connectedPair();
  Readiness r = waitReadableOrFailed(readSide, {}, Deadline::after(20ms));
  EXPECT_FALSE(r.readable);
  EXPECT_EQ(r.failed, -1);
}
