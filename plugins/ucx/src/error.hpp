// The one exception type inside the ucx plugin. plugin.cpp turns it into
// the pb_status it carries and stores its text for last_error().
#pragma once

#include <plugboard/transport.h>
#include <ucs/type/status.h>

#include <stdexcept>
#include <string>

namespace plugboard::ucx {

/// A failure with the status the ABI boundary reports for it. what() is a
/// complete sentence naming ranks and hosts where they are known.
class Error : public std::runtime_error {
 public:
  /// status must be one of the PB_ERR_* values.
  Error(pb_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  /// The status given at construction.
  pb_status status() const noexcept { return status_; }

 private:
  pb_status status_;
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
