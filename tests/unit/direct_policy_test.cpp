// DirectPolicy::threshold (collectives/exchange.hpp): which messages of an
// exchange travel as direct transfers.
#include <gtest/gtest.h>

#include <vector>

#include "collectives/exchange.hpp"

namespace plugboard {
namespace {

// Peers 0 and 1: cores scarce on the pair's hosts; peer 2: not.
const std::vector<bool> kScarce{true, true, false};

DirectPolicy policy(size_t minBytes, int peersAtOnce) {
  DirectPolicy p;
  p.minBytes = minBytes;
  p.peersAtOnce = peersAtOnce;
  p.coresScarce = &kScarce;
  return p;
}

TEST(DirectPolicy, OnePeerAtOnceKeepsTheSetting) {
  EXPECT_EQ(policy(262144, 1).threshold(1), 262144u);
  EXPECT_EQ(policy(1024, 1).threshold(1), 1024u);
}

TEST(DirectPolicy, ZeroMeansNoDirectTransfersWhateverThePeers) {
  EXPECT_EQ(policy(0, 1).threshold(1), 0u);
  EXPECT_EQ(policy(0, 7).threshold(1), 0u);
}

TEST(DirectPolicy, AllPeersShareTheSettingRoundedUpWhereCoresAreScarce) {
  EXPECT_EQ(policy(262144, 3).threshold(1), 87382u);  // 262144 / 3 = 87381.3
  EXPECT_EQ(policy(3 * 262144, 3).threshold(0), 262144u);
}

TEST(DirectPolicy, APairWithCoresToSpareKeepsTheSetting) {
  EXPECT_EQ(policy(262144, 3).threshold(2), 262144u);
  DirectPolicy unknown = policy(262144, 3);
  unknown.coresScarce = nullptr;
  EXPECT_EQ(unknown.threshold(1), 262144u);
  EXPECT_EQ(policy(262144, 3).threshold(7), 262144u);  // a rank past the table
}

TEST(DirectPolicy, AllPeersStopAtTheFloor) {
  EXPECT_EQ(policy(262144, 7).threshold(0), kDirectFloorBytes);
  EXPECT_EQ(policy(262144, 63).threshold(0), kDirectFloorBytes);
}

TEST(DirectPolicy, ASettingBelowTheFloorIsItsOwnFloor) {
  EXPECT_EQ(policy(1024, 3).threshold(1), 1024u);
  EXPECT_EQ(policy(100000, 3).threshold(1), kDirectFloorBytes);
}

TEST(DirectPolicy, APeerCountBelowOneCountsAsOne) { EXPECT_EQ(policy(262144, 0).threshold(1), 262144u); }

}  // namespace
}  // namespace plugboard
