#include "plugboard/datatype.hpp"

#include "plugboard/error.hpp"

namespace plugboard {

size_t dataTypeSize(DataType type) {
  switch (type) {
    case DataType::Int8: case DataType::Uint8: case DataType::Float8E4M3: case DataType::Float8E5M2: return 1;
    case DataType::Float16: case DataType::BFloat16: return 2;
    case DataType::Int32: case DataType::Uint32: case DataType::Float32: return 4;
    case DataType::Int64: case DataType::Uint64: case DataType::Float64: return 8;
  }
  throw Error(ErrorCode::InvalidUsage, "unknown data type " + std::to_string(static_cast<int>(type)));
}

const char* dataTypeName(DataType type) {
  switch (type) {
    case DataType::Int8: return "int8";
    case DataType::Uint8: return "uint8";
    case DataType::Int32: return "int32";
    case DataType::Uint32: return "uint32";
    case DataType::Int64: return "int64";
    case DataType::Uint64: return "uint64";
    case DataType::Float16: return "half";
    case DataType::BFloat16: return "bfloat16";
    case DataType::Float32: return "float";
    case DataType::Float64: return "double";
    case DataType::Float8E4M3: return "f8e4m3";
    case DataType::Float8E5M2: return "f8e5m2";
  }
  return "?";
}

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Avg: return "avg";
  }
  return "?";
}

DataType parseDataType(const std::string& n) {
  if (n == "int8" || n == "char") return DataType::Int8;
  if (n == "uint8") return DataType::Uint8;
  if (n == "int32" || n == "int") return DataType::Int32;
  if (n == "uint32") return DataType::Uint32;
  if (n == "int64") return DataType::Int64;
  if (n == "uint64") return DataType::Uint64;
  if (n == "half" || n == "float16" || n == "fp16") return DataType::Float16;
  if (n == "bfloat16" || n == "bf16") return DataType::BFloat16;
  if (n == "float" || n == "float32" || n == "fp32") return DataType::Float32;
  if (n == "double" || n == "float64" || n == "fp64") return DataType::Float64;
  if (n == "f8e4m3" || n == "float8e4m3" || n == "fp8e4m3" || n == "e4m3") return DataType::Float8E4M3;
  if (n == "f8e5m2" || n == "float8e5m2" || n == "fp8e5m2" || n == "e5m2") return DataType::Float8E5M2;
  throw Error(ErrorCode::InvalidUsage, "unknown data type '" + n +
                                           "' (int8, uint8, int32, uint32, int64, uint64, half, bfloat16, float, double, "
                                           "f8e4m3, f8e5m2)");
}

ReduceOp parseReduceOp(const std::string& n) {
  if (n == "sum") return ReduceOp::Sum;
  if (n == "prod") return ReduceOp::Prod;
  if (n == "min") return ReduceOp::Min;
  if (n == "max") return ReduceOp::Max;
  if (n == "avg") return ReduceOp::Avg;
  throw Error(ErrorCode::InvalidUsage, "unknown reduction '" + n + "' (sum, prod, min, max, avg)");
}

}  // namespace plugboard
