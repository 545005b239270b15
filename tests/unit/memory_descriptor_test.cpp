// The memory descriptor a peer sends with sendMemory: round trip, and every
// kind of malformed input is Error(Remote) naming the sender.
#include <gtest/gtest.h>

#include <cstring>

#include "communicator/memory_descriptor.hpp"
#include "plugboard/error.hpp"

using namespace plugboard;

namespace {

MemoryDescriptor sample() {
  MemoryDescriptor d;
  d.rank = 3;
  d.size = 4096;
  d.kind = MemoryKind::Cuda;
  d.regionId = 17;
  d.keys = {{"ethernet", {1, 2, 3}}, {"cudaipc", std::vector<char>(64, 'k')}, {"empty", {}}};
  return d;
}

void expectMalformed(const std::vector<char>& blob, const std::string& words) {
  try {
    decodeMemoryDescriptor(blob, "rank 5");
    FAIL() << "accepted a descriptor that should fail with: " << words;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Remote);
    EXPECT_NE(std::string(e.what()).find("rank 5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(MemoryDescriptor, RoundTripsEveryField) {
  const MemoryDescriptor d = sample();
  const MemoryDescriptor back = decodeMemoryDescriptor(encodeMemoryDescriptor(d), "rank 3");
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.size, 4096u);
  EXPECT_EQ(back.kind, MemoryKind::Cuda);
  EXPECT_EQ(back.regionId, 17u);
  EXPECT_EQ(back.keys, d.keys);
}

TEST(MemoryDescriptor, EveryTruncationIsNamed) {
  const std::vector<char> blob = encodeMemoryDescriptor(sample());
  for (size_t n = 0; n < blob.size(); ++n) {
    std::vector<char> cut(blob.begin(), blob.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(decodeMemoryDescriptor(cut, "rank 5"), Error) << "accepted " << n << " of " << blob.size() << " bytes";
  }
}

TEST(MemoryDescriptor, WrongMagicKindDuplicatesAndTrailingBytesAreRefused) {
  std::vector<char> blob = encodeMemoryDescriptor(sample());
  std::vector<char> magic = blob;
  magic[0] ^= 1;
  expectMalformed(magic, "not a memory descriptor");

  std::vector<char> kind = blob;
  const uint64_t two = 2;
  std::memcpy(kind.data() + 8 + 4 + 8, &two, sizeof(two));  // magic, rank, size, then the kind
  expectMalformed(kind, "memory kind 2");

  MemoryDescriptor twice = sample();
  twice.keys.push_back({"ethernet", {9}});
  expectMalformed(encodeMemoryDescriptor(twice), "'ethernet' named twice");

  std::vector<char> trailing = blob;
  trailing.push_back(0);
  expectMalformed(trailing, "bytes after the last key");

  std::vector<char> huge = blob;
  const uint64_t count = ~0ull;
  std::memcpy(huge.data() + 8 + 4 + 8 + 8 + 8, &count, sizeof(count));  // the key count
  expectMalformed(huge, "exceeds the message");
}
