// Non-blocking socket steps the bootstrap builds its wait loops from. The
// sockets may be in blocking mode: every call here passes MSG_DONTWAIT.
#pragma once

#include <poll.h>

#include <cstddef>
#include <vector>

#include "net/socket.hpp"

namespace plugboard::bootstrap {

/// Sends what fits without waiting; returns the bytes sent (maybe 0).
/// Throws NetError(Closed) when the peer is gone.
size_t sendSome(net::Socket& sock, const void* data, size_t size);

/// Reads what has arrived without waiting; returns the bytes read (maybe 0).
/// Throws NetError(Closed) at the end of the stream.
size_t recvSome(net::Socket& sock, void* data, size_t size);

/// poll() over fds until one is ready or the deadline; false at the deadline.
bool pollAny(std::vector<pollfd>& fds, net::Deadline deadline);

/// The address of the other end of a connected socket ("?" if unknown).
std::string peerAddressText(const net::Socket& sock);

}  // namespace plugboard::bootstrap
