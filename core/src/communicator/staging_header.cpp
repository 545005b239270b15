#include "communicator/staging_header.hpp"

namespace plugboard {

const char* stagingOpName(uint32_t op) {
  return op == kStagedWrite ? "write" : op == kStagedSignal ? "signal" : "operation";
}

std::string stagingHeaderProblem(const StagingSlotHeader& h, uint64_t expectedSeq, uint64_t chunkBytes,
                                 std::optional<uint64_t> regionBytes) {
  if (h.magic != kStagingMagic || h.seq != expectedSeq)
    return " has a malformed header (sequence " + std::to_string(h.seq) + ", expected " + std::to_string(expectedSeq) +
           ")";
  if (!regionBytes)
    return " targets region " + std::to_string(h.region) +
           ", which is not registered on this rank (deregistered while in use?)";
  const uint64_t size = *regionBytes;
  if (h.op == kStagedWrite) {
    if (h.size > chunkBytes || h.offset > size || h.size > size - h.offset)
      return ": " + std::to_string(h.size) + " bytes at offset " + std::to_string(h.offset) +
             " do not fit the region of " + std::to_string(size) + " bytes";
  } else if (h.op == kStagedSignal) {
    if (h.offset % 8 != 0 || h.offset > size || size - h.offset < 8)
      return ": offset " + std::to_string(h.offset) + " is not an aligned 8-byte slot of " + std::to_string(size) +
             " bytes";
  } else {
    return " has unknown operation code " + std::to_string(h.op);
  }
  return "";
}

}  // namespace plugboard
