// The staging receiver's check of a landing slot's header (the peer's bytes),
// which runs before any copy or signal is applied.
#include <gtest/gtest.h>

#include <limits>

#include "communicator/staging_header.hpp"
#include "plugboard/error.hpp"

namespace plugboard {
namespace {

constexpr uint64_t kChunk = 1 << 20;
constexpr uint64_t kRegion = 4096;
const std::string kWhere = "rank 1 (host b, ethernet): staged write in landing slot 3";

StagingSlotHeader header(uint32_t op, uint64_t offset, uint64_t size, uint64_t seq = 7) {
  return StagingSlotHeader{kStagingMagic, op, seq, 42, offset, size, 1, {0, 0}};
}

/// The Error(Remote) message check() throws, or "" when it accepts.
std::string refusal(const StagingSlotHeader& h, std::optional<uint64_t> region = kRegion) {
  try {
    checkStagingHeader(h, 7, kChunk, region, [] { return kWhere; });
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Remote);
    EXPECT_EQ(std::string(e.what()).find(kWhere), 0u) << e.what();
    return e.what();
  }
}

TEST(StagingHeader, WellFormedWritesAndSignalsInsideTheRegionPass) {
  EXPECT_EQ(refusal(header(kStagedWrite, 0, kRegion)), "");
  EXPECT_EQ(refusal(header(kStagedWrite, kRegion, 0)), "");
  EXPECT_EQ(refusal(header(kStagedWrite, 100, 3)), "");
  EXPECT_EQ(refusal(header(kStagedSignal, kRegion - 8, 0)), "");
}

TEST(StagingHeader, ABadMagicOrSequenceIsMalformed) {
  StagingSlotHeader h = header(kStagedWrite, 0, 8);
  h.magic ^= 1;
  EXPECT_NE(refusal(h).find("malformed header (sequence 7, expected 7)"), std::string::npos);
  EXPECT_NE(refusal(header(kStagedWrite, 0, 8, 8)).find("sequence 8, expected 7"), std::string::npos);
}

TEST(StagingHeader, ARegionNotRegisteredHereIsNamed) {
  EXPECT_NE(refusal(header(kStagedWrite, 0, 8), std::nullopt).find("targets region 42, which is not registered"),
            std::string::npos);
}

TEST(StagingHeader, WritesOutsideTheRegionOrLargerThanAChunkAreRefused) {
  EXPECT_NE(refusal(header(kStagedWrite, 1, kRegion)).find("4096 bytes at offset 1 do not fit the region of 4096"),
            std::string::npos);
  EXPECT_NE(refusal(header(kStagedWrite, kRegion + 1, 0)), "");
  const uint64_t huge = std::numeric_limits<uint64_t>::max();
  EXPECT_NE(refusal(header(kStagedWrite, 8, huge - 4)), "");  // offset + size wraps
  EXPECT_NE(refusal(header(kStagedWrite, huge, 16)), "");
  EXPECT_NE(refusal(header(kStagedWrite, 0, kChunk + 1), kChunk * 2), "");
}

TEST(StagingHeader, SignalsMustBeAlignedAndInside) {
  EXPECT_NE(refusal(header(kStagedSignal, 4, 0)).find("offset 4 is not an aligned 8-byte slot"), std::string::npos);
  EXPECT_NE(refusal(header(kStagedSignal, kRegion, 0)), "");
  EXPECT_NE(refusal(header(kStagedSignal, kRegion - 8, 0), 4), "");
  EXPECT_NE(refusal(header(kStagedSignal, std::numeric_limits<uint64_t>::max() - 7, 0)), "");
}

TEST(StagingHeader, AnUnknownOperationIsNamed) {
  EXPECT_NE(refusal(header(3, 0, 0)).find("unknown operation code 3"), std::string::npos);
  EXPECT_STREQ(stagingOpName(3), "operation");
  EXPECT_STREQ(stagingOpName(kStagedSignal), "signal");
}

}  // namespace
}  // namespace plugboard
