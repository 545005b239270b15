/// @file datatype.hpp
/// Element types and reduction operations of the collectives.
#pragma once

#include <cstddef>
#include <string>

namespace plugboard {

/// Element type of a collective's buffers. Float8E4M3 / Float8E5M2 are the
/// OCP 8-bit floats (plugboard/float8.hpp); host collectives reduce them in
/// float and round once per step (GPU collectives do not take them yet).
enum class DataType { Int8, Uint8, Int32, Uint32, Int64, Uint64, Float16, BFloat16, Float32, Float64, Float8E4M3, Float8E5M2 };

/// Reduction applied element-wise.
enum class ReduceOp { Sum, Prod, Min, Max, Avg };

/// Bytes per element. Throws Error(InvalidUsage) for a value outside the enum.
size_t dataTypeSize(DataType type);
/// "float32", "bfloat16", ... (the nccl-tests names: "float", "half", ... are accepted by the parser).
const char* dataTypeName(DataType type);
/// "sum", "prod", "min", "max", "avg".
const char* reduceOpName(ReduceOp op);
/// Parses a type name (plugboard or nccl-tests spelling); throws Error(InvalidUsage).
DataType parseDataType(const std::string& name);
/// Parses an op name; throws Error(InvalidUsage).
ReduceOp parseReduceOp(const std::string& name);

}  // namespace plugboard
