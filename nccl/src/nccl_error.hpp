// Errors at the C boundary: every entry point runs its body through
// guarded(), which turns exceptions into NCCL result codes and keeps the
// message for ncclGetLastError (per thread, as NCCL keeps it).
#pragma once

#include <exception>
#include <new>
#include <string>

#include "nccl.h"
#include "nccl_types.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard::ncclapi {

/// The result code NCCL gives for what a Plugboard error means.
Result resultFor(ErrorCode code);
/// Records message as this thread's last error, logs it, returns r.
ncclResult_t fail(Result r, const std::string& message);
/// This thread's last error text ("" if none).
const char* lastErrorText();

/// Throws ApiError-like failures as exceptions inside an entry point.
struct ApiFailure : std::exception {
  ApiFailure(Result r, std::string m) : result(r), message(std::move(m)) {}
  const char* what() const noexcept override { return message.c_str(); }
  Result result;
  std::string message;
};

/// Runs body (returning nothing) for the entry point `call`; exceptions
/// become result codes with the message recorded.
template <typename Body>
ncclResult_t guarded(const char* call, Body&& body) noexcept {
  try {
    body();
    return ncclSuccess;
  } catch (const ApiFailure& e) {
    return fail(e.result, std::string(call) + ": " + e.message);
  } catch (const Error& e) {
    return fail(resultFor(e.code()), std::string(call) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return fail(Result::SystemError, std::string(call) + ": out of host memory");
  } catch (const std::exception& e) {
    return fail(Result::InternalError, std::string(call) + ": " + e.what());
  } catch (...) {
    return fail(Result::InternalError, std::string(call) + ": unknown exception");
  }
}

}  // namespace plugboard::ncclapi
