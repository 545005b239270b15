/// @file error.hpp
/// Exception type thrown by every Plugboard C++ API.
#pragma once

#include <stdexcept>
#include <string>

namespace plugboard {

/// Category of a failure, so callers can react without parsing messages.
enum class ErrorCode {
  InvalidUsage,  ///< The caller passed bad arguments or called out of order.
  Config,        ///< A setting, YAML file or environment variable is wrong.
  Plugin,        ///< A transport plugin could not be found, loaded or initialised.
  Timeout,       ///< A wait ran past its limit.
  Remote,        ///< A peer closed, reset, disagreed or sent bad data.
  System,        ///< An operating-system call failed.
  Internal,      ///< An invariant did not hold: a bug in Plugboard.
  Aborted        ///< Communicator::abort() ended the call.
};

/// Returns a short lower-case name for code, e.g. "timeout".
const char* errorCodeName(ErrorCode code);

/// The one exception type of Plugboard. what() is a complete, user-facing
/// sentence naming rank, peer, host and transport where they are known.
class Error : public std::runtime_error {
 public:
  /// Creates an error of the given category.
  Error(ErrorCode code, const std::string& message);
  /// The category given at construction.
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace plugboard
