// The one exception type inside the ucx plugin. The ABI adapter
// (transport_cxx.hpp) turns it into the pb_status it carries and stores its
// text for last_error().
#pragma once

#include <plugboard/transport_cxx.hpp>
#include <ucs/type/status.h>

#include <stdexcept>
#include <string>

namespace plugboard::ucx {

/// A failure with the status the ABI boundary reports for it. what() is a
/// complete sentence naming ranks and hosts where they are known.
class Error : public transport_cxx::Failure {
 public:
  using Failure::Failure;
};

/// "what: <UCX's text for st>", for messages about a failed UCX call.
inline std::string ucsText(const std::string& what, ucs_status_t st) {
  return what + ": " + ucs_status_string(st);
}

}  // namespace plugboard::ucx

/// Throws plugboard::ucx::Error(status, message) unless cond holds.
#define PB_UCX_CHECK(cond, status, message)                                \
  do {                                                                     \
    if (!(cond)) throw ::plugboard::ucx::Error((status), (message));       \
  } while (0)
