// DirectPolicy::threshold (collectives/exchange.hpp): which messages of an
// exchange travel as direct transfers.
#include <gtest/gtest.h>

#include "collectives/exchange.hpp"

namespace plugboard {
namespace {

DirectPolicy policy(size_t minBytes, int peersAtOnce) {
  DirectPolicy p;
  p.minBytes = minBytes;
  p.peersAtOnce = peersAtOnce;
  return p;
}

TEST(DirectPolicy, OnePeerAtOnceKeepsTheSetting) {
  EXPECT_EQ(policy(262144, 1).threshold(), 262144u);
  EXPECT_EQ(policy(1024, 1).threshold(), 1024u);
}

TEST(DirectPolicy, ZeroMeansNoDirectTransfersWhateverThePeers) {
  EXPECT_EQ(policy(0, 1).threshold(), 0u);
  EXPECT_EQ(policy(0, 7).threshold(), 0u);
}

TEST(DirectPolicy, AllPeersShareTheSettingRoundedUp) {
  EXPECT_EQ(policy(262144, 3).threshold(), 87382u);  // 262144 / 3 = 87381.3
  EXPECT_EQ(policy(3 * 262144, 3).threshold(), 262144u);
}

TEST(DirectPolicy, AllPeersStopAtTheFloor) {
  EXPECT_EQ(policy(262144, 7).threshold(), kDirectFloorBytes);
  EXPECT_EQ(policy(262144, 63).threshold(), kDirectFloorBytes);
}

TEST(DirectPolicy, ASettingBelowTheFloorIsItsOwnFloor) {
  EXPECT_EQ(policy(1024, 3).threshold(), 1024u);
  EXPECT_EQ(policy(100000, 3).threshold(), kDirectFloorBytes);
}

TEST(DirectPolicy, APeerCountBelowOneCountsAsOne) { EXPECT_EQ(policy(262144, 0).threshold(), 262144u); }

}  // namespace
}  // namespace plugboard
