// The one exception type inside the libfabric plugin, and a check for fi_*
// return codes. The ABI adapter (transport_cxx.hpp) turns Error into the
// pb_status it carries and stores its text for last_error().
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <stdexcept>
#include <string>

namespace plugboard::libfabric {

/// A failure with the status the ABI boundary reports for it. what() is a
/// complete sentence naming ranks and hosts where they are known.
class Error : public transport_cxx::Failure {
 public:
  using Failure::Failure;
};

/// "fi_strerror(-rc) (rc)" for a negative fi_* return code.
std::string fiErrorText(long rc);

/// The pb_status a libfabric error code (positive FI_E* value) maps to:
/// peer-side failures (connection refused/reset, remote I/O or access
/// errors, unreachable) are PB_ERR_REMOTE, lack of memory PB_ERR_NOMEM,
/// everything else PB_ERR_SYSTEM.
pb_status statusForFiError(int err);

/// Throws Error(statusForFiError(-rc), what + ": " + fiErrorText(rc)) when
/// rc < 0; returns rc otherwise.
long fiCheck(long rc, const std::string& what);

}  // namespace plugboard::libfabric

/// Throws plugboard::libfabric::Error(status, message) unless cond holds.
#define OFI_CHECK(cond, status, message)                                          \
  do {                                                                            \
    if (!(cond)) throw ::plugboard::libfabric::Error((status), (message));        \
  } while (0)
