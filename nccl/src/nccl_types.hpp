// NCCL's enums in Plugboard's terms, and the argument checks NCCL makes
// (with NCCL's result codes). Pure functions: no CUDA, no communicator.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "plugboard/datatype.hpp"

namespace plugboard::ncclapi {

/// NCCL's ncclResult_t values (nccl.h).
enum class Result : int {
  Success = 0,
  UnhandledCudaError = 1,
  SystemError = 2,
  InternalError = 3,
  InvalidArgument = 4,
  InvalidUsage = 5,
  RemoteError = 6,
  InProgress = 7,
};

/// A failed check: the result NCCL would return and why.
struct ApiError {
  Result result;
  std::string message;
};

/// Plugboard's type for an ncclDataType_t value; nullopt outside 0..11.
std::optional<DataType> toDataType(int ncclType);
/// Plugboard's op for a built-in ncclRedOp_t value; nullopt for anything
/// else (PreMulSum ops are a communicator's: premul_sum_ops.hpp).
std::optional<ReduceOp> toReduceOp(int ncclOp);

/// count elements of type as bytes; nullopt when the product overflows size_t.
std::optional<size_t> byteCount(size_t count, DataType type);

/// Text of a result code, as ncclGetErrorString gives it.
const char* resultText(Result r);

}  // namespace plugboard::ncclapi
