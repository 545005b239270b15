#include "nccl_types.hpp"

#include <limits>

namespace plugboard::ncclapi {

std::optional<DataType> toDataType(int ncclType) {
  // NCCL orders Float32 and Float64 before BFloat16; Plugboard after it.
  switch (ncclType) {
    case 0: return DataType::Int8;
    case 1: return DataType::Uint8;
    case 2: return DataType::Int32;
    case 3: return DataType::Uint32;
    case 4: return DataType::Int64;
    case 5: return DataType::Uint64;
    case 6: return DataType::Float16;
    case 7: return DataType::Float32;
    case 8: return DataType::Float64;
    case 9: return DataType::BFloat16;
    case 10: return DataType::Float8E4M3;
    case 11: return DataType::Float8E5M2;
    default: return std::nullopt;
  }
}

std::optional<ReduceOp> toReduceOp(int ncclOp) {
  switch (ncclOp) {
    case 0: return ReduceOp::Sum;
    case 1: return ReduceOp::Prod;
    case 2: return ReduceOp::Max;
    case 3: return ReduceOp::Min;
    case 4: return ReduceOp::Avg;
    default: return std::nullopt;
  }
}

std::optional<size_t> byteCount(size_t count, DataType type) {
  const size_t size = dataTypeSize(type);
  if (count > std::numeric_limits<size_t>::max() / size) return std::nullopt;
  return count * size;
}

const char* resultText(Result r) {
  switch (r) {
    case Result::Success: return "no error";
    case Result::UnhandledCudaError: return "unhandled cuda error (run with PLUGBOARD_DEBUG=info for details)";
    case Result::SystemError: return "unhandled system error (run with PLUGBOARD_DEBUG=info for details)";
    case Result::InternalError: return "internal error - please report this issue to the Plugboard developers";
    case Result::InvalidArgument: return "invalid argument (run with PLUGBOARD_DEBUG=warn for details)";
    case Result::InvalidUsage: return "invalid usage (run with PLUGBOARD_DEBUG=warn for details)";
    case Result::RemoteError: return "remote process exited or there was a network error";
    case Result::InProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}

}  // namespace plugboard::ncclapi
