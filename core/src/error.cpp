#include "plugboard/error.hpp"

namespace plugboard {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidUsage: return "invalid usage";
    case ErrorCode::Config: return "configuration error";
    case ErrorCode::Plugin: return "plugin error";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::Remote: return "remote error";
    case ErrorCode::System: return "system error";
    case ErrorCode::Internal: return "internal error";
    case ErrorCode::Aborted: return "aborted";
  }
  return "unknown error";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

}  // namespace plugboard
