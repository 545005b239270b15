// SegmentReduction (collectives/segment_reduction.hpp) and reduceOutOf:
// arrivals from several peers, in pieces of different sizes, give what
// copying this rank's bytes and then reducing every peer's would give.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/reduce_kernels.hpp"
#include "collectives/segment_reduction.hpp"
#include "plugboard/error.hpp"

namespace plugboard {
namespace {

std::vector<int32_t> values(size_t n, int32_t seed) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i * 7 + 3) * seed - 50;
  return v;
}

const char* bytesOf(const std::vector<int32_t>& v) { return reinterpret_cast<const char*>(v.data()); }

TEST(ReduceOutOf, GivesTheBitsOfCopyThenReduceForEveryTypeAndOp) {
  const size_t n = 37;
  std::vector<uint8_t> a(n * 8 + 8), b(n * 8 + 8);  // room after the widest type: got[used] is checked
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(i * 13 + 1);
    b[i] = static_cast<uint8_t>(i * 29 + 7);
  }
  for (DataType t : {DataType::Int8, DataType::Uint8, DataType::Int32, DataType::Uint32, DataType::Int64,
                     DataType::Uint64, DataType::Float32, DataType::Float64, DataType::Float16, DataType::BFloat16,
                     DataType::Float8E4M3, DataType::Float8E5M2}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
      std::vector<uint8_t> want = a, got(a.size(), 0xee), inPlace = a;
      reduceInto(want.data(), b.data(), n, t, op);
      reduceOutOf(got.data(), a.data(), b.data(), n, t, op);
      reduceOutOf(inPlace.data(), inPlace.data(), b.data(), n, t, op);
      const size_t used = n * dataTypeSize(t);
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), used)) << dataTypeName(t) << " " << reduceOpName(op);
      EXPECT_EQ(0, std::memcmp(want.data(), inPlace.data(), used)) << dataTypeName(t) << " in place";
      EXPECT_EQ(got[used], 0xee) << "wrote past the end";
    }
  }
}

TEST(SegmentReduction, PeersArrivingInTurnInDifferentPiecesSumIntoAcc) {
  const size_t n = 1000, bytes = n * sizeof(int32_t);
  const auto mine = values(n, 1), p1 = values(n, 5), p2 = values(n, -3);
  std::vector<int32_t> acc(n, 12345);
  SegmentReduction r(bytesOf(mine), reinterpret_cast<char*>(acc.data()), bytes, DataType::Int32, ReduceOp::Sum);
  ChunkConsumer c1 = r.consumer(), c2 = r.consumer();
  // Peer 1 in pieces of 400 bytes, peer 2 in pieces of 1000: each ahead in turn.
  size_t o1 = 0, o2 = 0;
  while (o1 < bytes || o2 < bytes) {
    if (o2 < bytes) { const size_t k = std::min<size_t>(1000, bytes - o2); c2(o2, bytesOf(p2) + o2, k); o2 += k; }
    for (int i = 0; i < 3 && o1 < bytes; ++i) { const size_t k = std::min<size_t>(400, bytes - o1); c1(o1, bytesOf(p1) + o1, k); o1 += k; }
  }
  r.finish();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], mine[i] + p1[i] + p2[i]) << i;
}

TEST(SegmentReduction, InPlaceAndWithoutPeers) {
  const size_t n = 64, bytes = n * sizeof(int32_t);
  const auto p1 = values(n, 2);
  auto buf = values(n, 1);
  const auto before = buf;
  SegmentReduction inPlace(bytesOf(buf), reinterpret_cast<char*>(buf.data()), bytes, DataType::Int32, ReduceOp::Max);
  inPlace.consumer()(0, bytesOf(p1), bytes);
  inPlace.finish();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(buf[i], std::max(before[i], p1[i])) << i;

  std::vector<int32_t> acc(n, 0);
  SegmentReduction alone(bytesOf(before), reinterpret_cast<char*>(acc.data()), bytes, DataType::Int32, ReduceOp::Sum);
  alone.finish();  // no peer sent anything: acc is this rank's bytes
  EXPECT_EQ(acc, before);
}

TEST(SegmentReduction, AnArrivalPastWhatWasCombinedIsAnInternalError) {
  const size_t n = 16, bytes = n * sizeof(int32_t);
  const auto mine = values(n, 1);
  std::vector<int32_t> acc(n, 0);
  SegmentReduction r(bytesOf(mine), reinterpret_cast<char*>(acc.data()), bytes, DataType::Int32, ReduceOp::Sum);
  try {
    r.consumer()(16, bytesOf(mine), 16);  // bytes [0, 16) never arrived
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Internal);
    EXPECT_NE(std::string(e.what()).find("out of order"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace plugboard
