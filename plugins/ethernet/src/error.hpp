// The one exception type inside the ethernet plugin. The ABI adapter
// (transport_cxx.hpp) turns it into the pb_status it carries and stores its
// text for last_error().
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include "net/socket.hpp"

namespace plugboard::ethernet {

/// A failure with the status the ABI boundary reports for it. what() is a
/// complete sentence naming ranks and hosts where they are known.
class Error : public transport_cxx::Failure {
 public:
  using Failure::Failure;
};

/// Why a write stopped landing when its region went away under it: this
/// rank's doing (a region freed while a call using it still ran, often
/// after that call failed), not the peer's.
inline constexpr const char* kDeregisteredMidWrite =
    "this rank deregistered the region while its payload arrived (freed while a call using it still ran?)";

/// The status of a socket error on a connection: the peer's
/// (PB_ERR_REMOTE) when it closed or stopped acknowledging, else this host's.
inline pb_status statusOf(const net::NetError& e) {
  const bool peers = e.kind() == net::NetErrorKind::Closed || e.kind() == net::NetErrorKind::Unacknowledged;
  return peers ? PB_ERR_REMOTE : PB_ERR_SYSTEM;
}

/// What an Unacknowledged error means, for its message: ";
/// ethernet.ack_timeout is 30.0 s: the link to <peer> or that host is
/// down". Empty for other errors.
inline std::string explainUnacknowledged(const net::NetError& e, const std::string& peer,
                                         std::chrono::milliseconds ackTimeout) {
  if (e.kind() != net::NetErrorKind::Unacknowledged) return "";
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f s", static_cast<double>(ackTimeout.count()) / 1000.0);
  return std::string("; ethernet.ack_timeout is ") + seconds + ": the link to " + peer + " or that host is down";
}

}  // namespace plugboard::ethernet

/// Throws plugboard::ethernet::Error(status, message) unless cond holds.
#define ETH_CHECK(cond, status, message)                                         \
  do {                                                                           \
    if (!(cond)) throw ::plugboard::ethernet::Error((status), (message));        \
  } while (0)
