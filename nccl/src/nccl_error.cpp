#include "nccl_error.hpp"

namespace plugboard::ncclapi {
namespace {
thread_local std::string tlsLastError;
}  // namespace

Result resultFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidUsage: return Result::InvalidUsage;
    case ErrorCode::Config: return Result::InvalidUsage;
    case ErrorCode::Plugin: return Result::SystemError;
    case ErrorCode::Timeout: return Result::SystemError;
    case ErrorCode::Remote: return Result::RemoteError;
    case ErrorCode::System: return Result::SystemError;
    case ErrorCode::Internal: return Result::InternalError;
    case ErrorCode::Aborted: return Result::InvalidUsage;
  }
  return Result::InternalError;
}

ncclResult_t fail(Result r, const std::string& message) {
  tlsLastError = message;
  PB_LOG(Warn, "NCCL", message << " (" << resultText(r) << ")");
  return static_cast<ncclResult_t>(r);
}

const char* lastErrorText() { return tlsLastError.c_str(); }

}  // namespace plugboard::ncclapi
