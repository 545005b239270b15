#include "bootstrap/context.hpp"

#include <unistd.h>

#include <cstdio>

namespace plugboard::bootstrap {

std::string RankContext::who() const {
  return "bootstrap: rank " + std::to_string(rank) + " (host " + host + ")";
}

std::string hostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

std::string secondsText(std::chrono::milliseconds timeout) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(timeout.count()) / 1000.0);
  return buf;
}

ErrorCode errorCodeFor(const net::NetError& e) {
  switch (e.kind()) {
    case net::NetErrorKind::Timeout: return ErrorCode::Timeout;
    case net::NetErrorKind::Closed:
    case net::NetErrorKind::Unacknowledged: return ErrorCode::Remote;
    case net::NetErrorKind::Invalid: return ErrorCode::Config;
    case net::NetErrorKind::System: return ErrorCode::System;
  }
  return ErrorCode::Internal;
}

void rethrowNet(const net::NetError& e, const std::string& what) {
  throw Error(errorCodeFor(e), what + ": " + e.what());
}

}  // namespace plugboard::bootstrap
