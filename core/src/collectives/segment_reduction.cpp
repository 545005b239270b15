#include "collectives/segment_reduction.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "collectives/reduce_kernels.hpp"
#include "plugboard/error.hpp"

namespace plugboard {

SegmentReduction::SegmentReduction(const char* mine, char* acc, size_t bytes, DataType type, ReduceOp op)
    : mine_(mine), acc_(acc), bytes_(bytes), elementBytes_(dataTypeSize(type)), type_(type), op_(op) {}

ChunkConsumer SegmentReduction::consumer() {
  return [this](size_t offset, const char* data, size_t n) { take(offset, data, n); };
}

void SegmentReduction::finish() {
  if (combined_ < bytes_ && acc_ != mine_) std::memmove(acc_ + combined_, mine_ + combined_, bytes_ - combined_);
  combined_ = bytes_;
}

void SegmentReduction::take(size_t offset, const char* data, size_t n) {
  if (offset > combined_ || offset + n > bytes_)
    throw Error(ErrorCode::Internal, "segment reduction: " + std::to_string(n) + " bytes at offset " +
                                         std::to_string(offset) + " of " + std::to_string(bytes_) +
                                         " arrived out of order (combined so far: " + std::to_string(combined_) + ")");
  const size_t seen = std::min(combined_, offset + n);  // [offset, seen) holds mine combined with others already
  if (seen > offset) reduceInto(acc_ + offset, data, (seen - offset) / elementBytes_, type_, op_);
  if (offset + n > seen)
    reduceOutOf(acc_ + seen, mine_ + seen, data + (seen - offset), (offset + n - seen) / elementBytes_, type_, op_);
  combined_ = std::max(combined_, offset + n);
}

}  // namespace plugboard
