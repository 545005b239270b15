// The one exception type inside the cudaipc plugin. plugin.cpp turns it into
// the pb_status it carries and stores its text for last_error().
#pragma once

#include <plugboard/transport.h>

#include <stdexcept>
#include <string>

namespace plugboard::cudaipc {

/// A failure with the status the ABI boundary reports for it. what() is a
/// complete sentence naming ranks, hosts and GPUs where they are known.
class Error : public std::runtime_error {
 public:
  /// status must be one of the PB_ERR_* values.
  Error(pb_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  /// The status given at construction.
  pb_status status() const noexcept { return status_; }

 private:
  pb_status status_;
};

}  // namespace plugboard::cudaipc

/// Throws plugboard::cudaipc::Error(status, message) unless cond holds.
#define IPC_CHECK(cond, status, message)                                     \
  do {                                                                       \
    if (!(cond)) throw ::plugboard::cudaipc::Error((status), (message));     \
  } while (0)
