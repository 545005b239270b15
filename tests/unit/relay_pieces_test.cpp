// How the host relay cuts a large GPU call into pieces (relay_pieces.hpp),
// checked by running the pieces: each rank's copies into a small data area,
// the host collective each piece names applied in place on every rank's
// area, the copies out; every rank's result must be the whole call's.
// Host code only; built where the library has its CUDA path.
#include <gtest/gtest.h>

#ifdef PLUGBOARD_HAVE_CUDA

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gpu/collectives/relay_pieces.hpp"
#include "plugboard/error.hpp"

using namespace plugboard;
using namespace plugboard::gpucoll;

namespace {

using Buffer = std::vector<int32_t>;
constexpr uint32_t kE = sizeof(int32_t);

/// Applies copy c between user (int32 elements) and area, as the copy engine would.
void applyCopy(const RelayCopy& c, Buffer& user, std::vector<char>& area, bool toArea) {
  for (uint64_t r = 0; r < c.rows; ++r) {
    char* u = reinterpret_cast<char*>(user.data()) + c.userOffset + r * c.userPitch;
    char* a = area.data() + c.areaOffset + r * c.areaPitch;
    ASSERT_LE(c.areaOffset + r * c.areaPitch + c.bytes, area.size()) << "a row past the area";
    ASSERT_LE(c.userOffset + r * c.userPitch + c.bytes, user.size() * kE) << "a row past the caller's buffer";
    if (toArea) std::memcpy(a, u, c.bytes);
    else std::memcpy(u, a, c.bytes);
  }
}

int32_t& at(std::vector<char>& area, uint64_t i) { return reinterpret_cast<int32_t*>(area.data())[i]; }

/// The host collective of `call` in place on every rank's area (int32 sum).
void runCollective(const RelayCall& call, std::vector<std::vector<char>>& areas) {
  const int n = static_cast<int>(areas.size());
  const uint64_t k = call.count;
  const std::vector<std::vector<char>> before = areas;
  auto was = [&](int r, uint64_t i) { return reinterpret_cast<const int32_t*>(before[r].data())[i]; };
  for (int r = 0; r < n; ++r) {
    switch (static_cast<Coll>(call.coll)) {
      case Coll::AllReduce:
      case Coll::Reduce:
        if (static_cast<Coll>(call.coll) == Coll::Reduce && r != call.root) break;
        for (uint64_t i = 0; i < k; ++i) {
          at(areas[r], i) = 0;
          for (int j = 0; j < n; ++j) at(areas[r], i) += was(j, i);
        }
        break;
      case Coll::Broadcast:
        for (uint64_t i = 0; i < k; ++i) at(areas[r], i) = was(call.root, i);
        break;
      case Coll::AllGather:
        for (int j = 0; j < n; ++j)
          for (uint64_t i = 0; i < k; ++i) at(areas[r], j * k + i) = was(j, j * k + i);
        break;
      case Coll::ReduceScatter:
        for (uint64_t i = 0; i < k; ++i) {
          at(areas[r], r * k + i) = 0;
          for (int j = 0; j < n; ++j) at(areas[r], r * k + i) += was(j, r * k + i);
        }
        break;
      case Coll::AllToAll:
        for (int j = 0; j < n; ++j)
          for (uint64_t i = 0; i < k; ++i) at(areas[r], j * k + i) = was(j, r * k + i);
        break;
      default: FAIL() << "not a collective: " << call.coll;
    }
  }
}

/// Runs coll's pieces on n ranks (send buffers filled by rank), returns the recv buffers.
std::vector<Buffer> runPieces(Coll coll, uint64_t count, int n, int root, uint64_t areaBytes, uint64_t sendElems,
                              uint64_t recvElems, size_t* pieces = nullptr) {
  std::vector<Buffer> send(n), recv(n, Buffer(recvElems, -1));
  std::vector<std::vector<RelayPiece>> cut(n);
  for (int r = 0; r < n; ++r) {
    for (uint64_t i = 0; i < sendElems; ++i) send[r].push_back(static_cast<int32_t>(1000 * r + i));
    RelayCallShape s{coll, count, 0, 7, 0, kE, r, n, root, -1};
    cut[r] = relayPieces(s, areaBytes);
    EXPECT_EQ(cut[r].size(), cut[0].size()) << "ranks cut the call differently";
  }
  if (pieces) *pieces = cut[0].size();
  std::vector<std::vector<char>> areas(n, std::vector<char>(areaBytes, 0));
  for (size_t p = 0; p < cut[0].size(); ++p) {
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(cut[r][p].call.count, cut[0][p].call.count);
      EXPECT_EQ(cut[r][p].call.coll, static_cast<uint32_t>(coll));
      applyCopy(cut[r][p].in, send[r], areas[r], true);
    }
    runCollective(cut[0][p].call, areas);
    for (int r = 0; r < n; ++r) applyCopy(cut[r][p].out, recv[r], areas[r], false);
  }
  return recv;
}

struct Case {
  uint64_t count, areaBytes;
  int n;
};
const Case kCases[] = {{1, 64, 2}, {16, 64, 2}, {17, 64, 2}, {100, 64, 3}, {1001, 256, 4}, {5, 1 << 20, 3}, {333, 48, 3}};

int32_t sumOf(int n, uint64_t i) {
  int32_t v = 0;
  for (int j = 0; j < n; ++j) v += static_cast<int32_t>(1000 * j + i);
  return v;
}

}  // namespace

TEST(RelayPieces, AllReduceReduceAndBroadcastGiveTheWholeCallsResult) {
  for (const Case& c : kCases) {
    SCOPED_TRACE("count " + std::to_string(c.count) + ", area " + std::to_string(c.areaBytes));
    size_t pieces = 0;
    auto all = runPieces(Coll::AllReduce, c.count, c.n, 0, c.areaBytes, c.count, c.count, &pieces);
    EXPECT_EQ(pieces, (c.count + c.areaBytes / kE - 1) / (c.areaBytes / kE));
    for (int r = 0; r < c.n; ++r)
      for (uint64_t i = 0; i < c.count; ++i) ASSERT_EQ(all[r][i], sumOf(c.n, i)) << "allreduce rank " << r << " [" << i << "]";
    const int root = c.n - 1;
    auto red = runPieces(Coll::Reduce, c.count, c.n, root, c.areaBytes, c.count, c.count);
    for (uint64_t i = 0; i < c.count; ++i) ASSERT_EQ(red[root][i], sumOf(c.n, i)) << "reduce [" << i << "]";
    for (uint64_t i = 0; i < c.count; ++i) ASSERT_EQ(red[0][i], -1) << "a reduce's non-root got a result";
    auto bc = runPieces(Coll::Broadcast, c.count, c.n, root, c.areaBytes, c.count, c.count);
    for (int r = 0; r < c.n; ++r)
      for (uint64_t i = 0; i < c.count; ++i) ASSERT_EQ(bc[r][i], 1000 * root + static_cast<int32_t>(i));
  }
}

TEST(RelayPieces, RankBlockCollectivesGiveTheWholeCallsResult) {
  for (const Case& c : kCases) {
    if (c.areaBytes < static_cast<uint64_t>(c.n) * kE) continue;
    SCOPED_TRACE("count " + std::to_string(c.count) + ", area " + std::to_string(c.areaBytes));
    const uint64_t k = c.count, n = static_cast<uint64_t>(c.n);
    auto ag = runPieces(Coll::AllGather, k, c.n, 0, c.areaBytes, k, n * k);
    for (int r = 0; r < c.n; ++r)
      for (uint64_t j = 0; j < n; ++j)
        for (uint64_t i = 0; i < k; ++i) ASSERT_EQ(ag[r][j * k + i], static_cast<int32_t>(1000 * j + i));
    auto rs = runPieces(Coll::ReduceScatter, k, c.n, 0, c.areaBytes, n * k, k);
    for (int r = 0; r < c.n; ++r)
      for (uint64_t i = 0; i < k; ++i) ASSERT_EQ(rs[r][i], sumOf(c.n, r * k + i)) << "reducescatter rank " << r;
    auto a2a = runPieces(Coll::AllToAll, k, c.n, 0, c.areaBytes, n * k, n * k);
    for (int r = 0; r < c.n; ++r)
      for (uint64_t j = 0; j < n; ++j)
        for (uint64_t i = 0; i < k; ++i)
          ASSERT_EQ(a2a[r][j * k + i], static_cast<int32_t>(1000 * j + r * k + i)) << "alltoall rank " << r;
  }
}

TEST(RelayPieces, BothEndsOfAMessageCutItAlikeWhicheverCallsTheyMake) {
  // Rank 0 sends 0 -> 1 with sendrecv (receiving less from 1); rank 1 makes a
  // recv and then a send, or a sendrecv: piece by piece the messages match.
  const uint64_t area = 40, big = 47, small = 9;  // 10 elements a piece
  RelayCallShape a{Coll::SendRecv, big, small, 7, 0, kE, 0, 2, 1, 1};
  const auto sr = relayPieces(a, area);
  ASSERT_EQ(sr.size(), 5u);
  EXPECT_EQ(sr[0].call.coll, static_cast<uint32_t>(Coll::SendRecv));
  EXPECT_EQ(sr[0].call.recvCount, small);
  EXPECT_EQ(sr[1].call.coll, static_cast<uint32_t>(Coll::Send));  // the receive ran out after one piece
  EXPECT_EQ(sr[4].call.count, 7u);
  RelayCallShape recvOnly{Coll::Recv, big, 0, 7, 0, kE, 1, 2, 0, 0};
  RelayCallShape sendBack{Coll::Send, small, 0, 7, 0, kE, 1, 2, 0, -1};
  const auto r = relayPieces(recvOnly, area), s = relayPieces(sendBack, area);
  ASSERT_EQ(r.size(), 5u);
  ASSERT_EQ(s.size(), 1u);
  uint64_t sentBy0 = 0, receivedBy1 = 0;
  for (size_t p = 0; p < r.size(); ++p) {
    EXPECT_EQ(r[p].call.coll, static_cast<uint32_t>(Coll::Recv));
    EXPECT_EQ(r[p].call.root, 0);
    EXPECT_EQ(r[p].call.count, sr[p].call.count) << "piece " << p << ": the two ends disagree on its size";
    EXPECT_EQ(r[p].out.userOffset, sr[p].in.userOffset);
    sentBy0 += sr[p].in.bytes;
    receivedBy1 += r[p].out.bytes;
  }
  EXPECT_EQ(sentBy0, big * kE);
  EXPECT_EQ(receivedBy1, big * kE);
  EXPECT_EQ(s[0].call.root, 0);
  EXPECT_EQ(s[0].call.count, sr[0].call.recvCount);
  EXPECT_EQ(sr[0].call.recvPeer, 1);
  EXPECT_TRUE(s[0].out.empty());
}

TEST(RelayPieces, AnAreaThatHoldsNoPieceAndAnUnservedCallAreRefused) {
  RelayCallShape s{Coll::AllGather, 10, 0, 7, 0, kE, 0, 8, 0, -1};
  EXPECT_THROW(relayPieces(s, 16), Error);  // 8 ranks x 4 bytes do not fit 16
  s.coll = static_cast<Coll>(99);
  try {
    relayPieces(s, 1 << 20);
    FAIL() << "an unknown collective was cut";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not serve"), std::string::npos) << e.what();
  }
  s.coll = Coll::AllReduce;
  s.count = 0;
  EXPECT_TRUE(relayPieces(s, 64).empty());
}

#endif  // PLUGBOARD_HAVE_CUDA
