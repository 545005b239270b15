// Who this rank is, for error messages and logs, and the mapping of socket
// errors onto Plugboard errors.
#pragma once

#include <chrono>
#include <string>

#include "net/socket.hpp"
#include "plugboard/error.hpp"

namespace plugboard::bootstrap {

/// This process's identity within the job.
struct RankContext {
  int rank = -1;
  int nranks = 0;
  std::string host;  ///< This host's name.

  /// "bootstrap: rank 2 (host h1)", the start of every message.
  std::string who() const;
};

/// The local host name ("?" if unknown).
std::string hostName();

/// "2.0 s", for timeout messages.
std::string secondsText(std::chrono::milliseconds timeout);

/// Timeout->Timeout, Closed->Remote, Invalid->Config, System->System.
ErrorCode errorCodeFor(const net::NetError& e);

/// Throws Error(errorCodeFor(e), what + ": " + e.what()).
[[noreturn]] void rethrowNet(const net::NetError& e, const std::string& what);

}  // namespace plugboard::bootstrap
