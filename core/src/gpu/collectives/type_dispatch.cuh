// Maps a runtime (DataType, ReduceOp) to one kernel instantiation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "gpu/collectives/reduce_ops.cuh"
#include "plugboard/datatype.hpp"
#include "plugboard/error.hpp"

namespace plugboard::gpucoll {

/// Calls f(T{}, Op{}) for the element type and op; throws Error(InvalidUsage)
/// for a pair the GPU collectives do not support (callers check earlier).
template <typename F>
void dispatchTypeOp(DataType type, ReduceOp op, F&& f) {
  auto withOp = [&](auto t) {
    switch (op) {
      case ReduceOp::Sum: return f(t, OpSum{});
      case ReduceOp::Prod: return f(t, OpProd{});
      case ReduceOp::Min: return f(t, OpMin{});
      case ReduceOp::Max: return f(t, OpMax{});
      default: break;
    }
    throw Error(ErrorCode::InvalidUsage, std::string("GPU collectives: unsupported reduce op ") + reduceOpName(op));
  };
  switch (type) {
    case DataType::Float32: return withOp(float{});
    case DataType::Float16: return withOp(__half{});
    case DataType::BFloat16: return withOp(__nv_bfloat16{});
    case DataType::Int32: return withOp(int32_t{});
    case DataType::Uint8: return withOp(uint8_t{});
    default: break;
  }
  throw Error(ErrorCode::InvalidUsage, std::string("GPU collectives: unsupported data type ") + dataTypeName(type));
}

}  // namespace plugboard::gpucoll
