// Maps a runtime (DataType, ReduceOp) to one kernel instantiation. Avg runs
// the Sum kernels; the caller passes the rank count as the divisor.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <string>

#include "gpu/collectives/reduce_ops.cuh"
#include "plugboard/datatype.hpp"
#include "plugboard/error.hpp"

namespace plugboard::gpucoll {

/// Every DataType, in enum order (for the kernel preloads).
inline constexpr DataType kAllTypes[] = {DataType::Int8,     DataType::Uint8,      DataType::Int32,     DataType::Uint32,
                                         DataType::Int64,    DataType::Uint64,     DataType::Float16,   DataType::BFloat16,
                                         DataType::Float32,  DataType::Float64,    DataType::Float8E4M3, DataType::Float8E5M2};
/// The ops with a kernel of their own (Avg runs Sum's).
inline constexpr ReduceOp kKernelOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max};

/// Calls f(T{}, Op{}) for the element type and op; throws Error(InvalidUsage)
/// for a value outside the enums (callers check earlier).
template <typename F>
void dispatchTypeOp(DataType type, ReduceOp op, F&& f) {
  auto withOp = [&](auto t) {
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::Avg: return f(t, OpSum{});
      case ReduceOp::Prod: return f(t, OpProd{});
      case ReduceOp::Min: return f(t, OpMin{});
      case ReduceOp::Max: return f(t, OpMax{});
    }
    throw Error(ErrorCode::InvalidUsage, "GPU collectives: unknown reduce op " + std::to_string(static_cast<int>(op)));
  };
  switch (type) {
    case DataType::Int8: return withOp(int8_t{});
    case DataType::Uint8: return withOp(uint8_t{});
    case DataType::Int32: return withOp(int32_t{});
    case DataType::Uint32: return withOp(uint32_t{});
    case DataType::Int64: return withOp(int64_t{});
    case DataType::Uint64: return withOp(uint64_t{});
    case DataType::Float16: return withOp(__half{});
    case DataType::BFloat16: return withOp(__nv_bfloat16{});
    case DataType::Float32: return withOp(float{});
    case DataType::Float64: return withOp(double{});
    case DataType::Float8E4M3: return withOp(__nv_fp8_e4m3{});
    case DataType::Float8E5M2: return withOp(__nv_fp8_e5m2{});
  }
  throw Error(ErrorCode::InvalidUsage, "GPU collectives: unknown data type " + std::to_string(static_cast<int>(type)));
}

}  // namespace plugboard::gpucoll
