// The one exception type inside the shm plugin.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <string>

namespace shm {

/// A failure with the status the ABI boundary reports for it; what() is a
/// whole sentence. The adapter (transport_cxx.hpp) returns the status and
/// keeps the text for last_error().
class Error : public plugboard::transport_cxx::Failure {
 public:
  using Failure::Failure;
};

/// "what: strerror(errno)" for a failed system call.
std::string systemError(const std::string& what);

}  // namespace shm

/// Throws shm::Error(status, message) unless cond holds.
#define SHM_CHECK(cond, status, message)                  \
  do {                                                     \
    if (!(cond)) throw ::shm::Error((status), (message));  \
  } while (0)
