// The header the staging engine's sender puts in front of every landing
// slot's payload, and the receiver's check of it before anything is
// applied. CUDA-free, so the unit tests and fuzz_staging_header reach the
// check on machines without a GPU (gpu/staging_receiver.cpp applies it).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "plugboard/error.hpp"

namespace plugboard {

/// What the sender puts in front of every landing slot's payload.
struct StagingSlotHeader {
  uint32_t magic;   ///< kStagingMagic.
  uint32_t op;      ///< StagingOp.
  uint64_t seq;     ///< Landing sequence number, checked by the receiver.
  uint64_t region;  ///< The receiver's RegisteredMemoryImpl::id.
  uint64_t offset;  ///< Byte offset in that region.
  uint64_t size;    ///< Payload bytes (Write).
  uint64_t value;   ///< Amount to add (Signal).
  uint64_t reserved[2];
};
static_assert(sizeof(StagingSlotHeader) == 64, "the payload starts one cache line into the slot");

/// Operations a landing slot carries.
enum StagingOp : uint32_t { kStagedWrite = 1, kStagedSignal = 2 };
/// Marks a well-formed header.
constexpr uint32_t kStagingMagic = 0x50425354;  // "PBST"

/// "write", "signal", or "operation" for any other code.
const char* stagingOpName(uint32_t op);

/// What is wrong with landing-slot header h, which came from the peer, as
/// a phrase to follow the slot's description (" has a malformed header
/// ...", ": 9 bytes at offset ..."), or "" (no allocation) when nothing is:
/// its magic, that its sequence is expectedSeq, that it names a region
/// registered on this rank (regionBytes: that region's size, nullopt when
/// h.region is not one), and that its write (at most chunkBytes) or its
/// 8-byte aligned signal lies inside that region.
std::string stagingHeaderProblem(const StagingSlotHeader& h, uint64_t expectedSeq, uint64_t chunkBytes,
                                 std::optional<uint64_t> regionBytes);

/// Throws Error(Remote) with describe() (naming the connection and slot;
/// called only then, so a well-formed slot builds no string) followed by
/// stagingHeaderProblem() when there is one.
template <typename Describe>
void checkStagingHeader(const StagingSlotHeader& h, uint64_t expectedSeq, uint64_t chunkBytes,
                        std::optional<uint64_t> regionBytes, Describe&& describe) {
  std::string problem = stagingHeaderProblem(h, expectedSeq, chunkBytes, regionBytes);
  if (!problem.empty()) throw Error(ErrorCode::Remote, describe() + problem);
}

}  // namespace plugboard
