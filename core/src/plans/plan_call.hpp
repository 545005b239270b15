// The arguments of one run of a plan, checked alike by every executor.
#pragma once

#include <string>

#include "plugboard/datatype.hpp"
#include "plugboard/error.hpp"
#include "plugboard/plan.hpp"

namespace plugboard {

/// Checks a run of plan with count elements of type: they cut into the
/// plan's input chunks and fit the maxInputBytes the executor was made
/// for, and an in-place plan takes input == output. Throws
/// Error(InvalidUsage) "<who>: <what>"; returns the input's bytes.
inline size_t checkPlanCall(const Plan& plan, const std::string& who, size_t count, DataType type, size_t maxInputBytes,
                            const void* input, const void* output) {
  const size_t bytes = count * dataTypeSize(type);
  if (count % plan.inputChunks)
    throw Error(ErrorCode::InvalidUsage, who + ": " + std::to_string(count) + " elements do not cut into " +
                                             std::to_string(plan.inputChunks) + " equal input chunks");
  if (bytes > maxInputBytes)
    throw Error(ErrorCode::InvalidUsage, who + ": " + std::to_string(bytes) + " bytes of input, more than the " +
                                             std::to_string(maxInputBytes) + " the executor was made for");
  if (plan.inPlace && input != output)
    throw Error(ErrorCode::InvalidUsage, who + ": an in-place plan takes input == output");
  return bytes;
}

}  // namespace plugboard
