// The one exception type inside the shm plugin. plugin.cpp turns it into
// the pb_status it carries and keeps its text for last_error().
#pragma once

#include <plugboard/transport.h>

#include <stdexcept>
#include <string>

namespace shm {

/// A failure with the status the ABI boundary reports for it.
class Error : public std::runtime_error {
 public:
  /// status is one of the PB_ERR_* values; message is a whole sentence.
  Error(pb_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  /// The status given at construction.
  pb_status status() const noexcept { return status_; }

 private:
  pb_status status_;
};

/// "what: strerror(errno)" for a failed system call.
std::string systemError(const std::string& what);

}  // namespace shm

/// Throws shm::Error(status, message) unless cond holds.
#define SHM_CHECK(cond, status, message)                  \
  do {                                                     \
    if (!(cond)) throw ::shm::Error((status), (message));  \
  } while (0)
