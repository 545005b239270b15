// Tests of libplugboard-ib-verbs.so through its C ABI only, as the core
// uses it: dlopen, a fake host-services table, two plugin contexts (ranks 0
// and 1 of one host) in this process, looped back through the first usable
// RDMA port, with one queue pair a connection and with four (striped).
// Where ibv_get_device_list finds no usable port (CI, the GPU machines) the
// tests that need one skip with init's reason (and fail with it under
// PB_TEST_IB_VERBS_REQUIRE=1, ib_verbs_test_support.hpp), and what can be
// checked without a device is: init's refusal naming the rank and host,
// settings refused before any device is touched.
#include "ib_verbs_test_support.hpp"
#include "plugin_test_support.hpp"
#include "transport_pair_suite.hpp"
#include <plugboard/transport.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#ifndef PLUGBOARD_IB_VERBS_PLUGIN
#error "PLUGBOARD_IB_VERBS_PLUGIN must name libplugboard-ib-verbs.so"
#endif

namespace {

using plugboard::test::FakeHost;
using plugboard::test::ibVerbsSkipReason;

/// Settings every test context starts from: ib-verbs.hca from
/// PB_TEST_IB_VERBS_HCA when set (tests/rdma/soft_roce.sh names its device).
std::map<std::string, std::string> baseSettings() {
  const char* hca = std::getenv("PB_TEST_IB_VERBS_HCA");
  if (hca && *hca) return {{"hca", hca}};
  return {};
}

const pb_transport_v1* plugin() {
  static const pb_transport_v1* table = plugboard::test::loadPluginTable(PLUGBOARD_IB_VERBS_PLUGIN);
  return table;
}

/// Why no context can be made here ("" when one can), found once.
const std::string& unusableReason() {
  static const std::string reason =
      plugboard::test::initFailure(plugin(), "testhost", baseSettings(), "no usable RDMA port: ");
  return reason;
}

/// ib-verbs as the shared suites see it: RDMA needs no target-side polling,
/// but completions arrive only through proxy_progress, so waits poll.
const plugboard::test::TransportUnderTest* ibVerbsTransport() {
  static const plugboard::test::TransportUnderTest t = [] {
    plugboard::test::TransportUnderTest d;
    d.label = "ib_verbs";
    d.name = "ib-verbs";
    d.pluginPath = PLUGBOARD_IB_VERBS_PLUGIN;
    d.table = &plugin;
    d.settings = baseSettings();
    d.firstSettingKey = "hca";
    d.whyUnusable = [] { return ibVerbsSkipReason(unusableReason()); };
    d.progressWhileWaiting = &plugboard::test::pollTheOtherConnections;
    return d;
  }();
  return &t;
}

/// ib-verbs over four queue pairs a connection, writes of two 4 KiB stripes
/// and more split over them, nothing inline: the striping, a signal's wait
/// for the other queue pairs and non-inline small writes all run.
const plugboard::test::TransportUnderTest* stripedIbVerbsTransport() {
  static const plugboard::test::TransportUnderTest t = [] {
    plugboard::test::TransportUnderTest d = *ibVerbsTransport();
    d.label = "ib_verbs_striped";
    d.settings["qps_per_connection"] = "4";
    d.settings["stripe_min_bytes"] = "4096";
    d.settings["inline_bytes"] = "0";
    return d;
  }();
  return &t;
}

using plugboard::test::TransportDeclareTest;
using plugboard::test::TransportLoadTest;
using plugboard::test::TransportOrderingTest;
using plugboard::test::TransportPairTest;
using plugboard::test::TransportWriteSizeTest;
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportLoadTest, ibVerbsTransport());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportDeclareTest, ibVerbsTransport());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportPairTest, ibVerbsTransport(), stripedIbVerbsTransport());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportOrderingTest, ibVerbsTransport(), stripedIbVerbsTransport());
INSTANTIATE_TEST_SUITE_P(Conformance, TransportWriteSizeTest,
                         ::testing::Combine(::testing::Values(ibVerbsTransport(), stripedIbVerbsTransport()),
                                            ::plugboard::test::suiteWriteSizes()),
                         ::plugboard::test::labelAndSizeOf);

/// init with these settings; returns its status and last_error(NULL).
std::pair<pb_status, std::string> initWith(std::map<std::string, std::string> settings) {
  const pb_transport_v1* t = plugin();
  FakeHost host(3, "hostx", std::move(settings));
  pb_plugin_ctx* ctx = nullptr;
  const pb_status st = t->init(&host.services, &ctx);
  std::string why = st == PB_OK ? "" : t->last_error(nullptr);
  if (st == PB_OK) t->finalize(ctx);
  return {st, why};
}

// The striped configuration's keys are declared and its values accepted:
// a misspelt key would be ignored and the variant would quietly test the
// defaults wherever a device exists.
TEST(IbVerbsPlugin, TheStripedConfigurationIsDeclaredAndAccepted) {
  const pb_transport_v1* t = plugin();
  ASSERT_NE(t, nullptr);
  FakeHost host(0, "hostx", stripedIbVerbsTransport()->settings);
  pb_plugin_ctx* ctx = nullptr;
  const pb_status st = t->init(&host.services, &ctx);
  EXPECT_TRUE(st == PB_OK || st == PB_ERR_UNSUPPORTED) << t->last_error(nullptr);
  if (st == PB_OK) t->finalize(ctx);
  for (const auto& [key, value] : stripedIbVerbsTransport()->settings)
    EXPECT_EQ(host.declared.count(key), 1u) << key << " is not a setting ib-verbs declares";
}

TEST(IbVerbsPlugin, WithoutAnRdmaPortInitRefusesNamingRankHostAndWhy) {
  ASSERT_NE(plugin(), nullptr);
  if (unusableReason().empty()) GTEST_SKIP() << "this host has a usable RDMA port";
  const auto [st, why] = initWith({});
  EXPECT_EQ(st, PB_ERR_UNSUPPORTED);
  EXPECT_NE(why.find("ib-verbs: rank 3 (host hostx)"), std::string::npos) << why;
  EXPECT_TRUE(why.find("no RDMA device") != std::string::npos || why.find("no usable RDMA port") != std::string::npos)
      << why;
}

TEST(IbVerbsPlugin, BadSettingsAreRefusedBeforeAnyDeviceIsTouched) {
  ASSERT_NE(plugin(), nullptr);
  const std::map<std::string, std::string> cases[] = {
      {{"qps_per_connection", "0"}}, {{"mtu", "1000"}}, {{"timeout", "40"}}, {{"hca", "mlx5_0:x"}}};
  const char* names[] = {"ib-verbs.qps_per_connection", "ib-verbs.mtu", "ib-verbs.timeout", "ib-verbs.hca from"};
  for (size_t i = 0; i < 4; ++i) {
    const auto [st, why] = initWith(cases[i]);
    EXPECT_EQ(st, PB_ERR_INVALID) << why;
    EXPECT_NE(why.find(names[i]), std::string::npos) << why;
  }
}

// Where the host has RDMA ports, a filter that selects none of them is the
// reason init names for each (made-up ports: IbDevice.* in the parts test).
TEST(IbVerbsPlugin, AnHcaFilterThatSelectsNothingSaysSo) {
  ASSERT_NE(plugin(), nullptr);
  const bool noDevice = unusableReason().find("found no RDMA device") != std::string::npos;
  const std::string why = ibVerbsSkipReason(noDevice ? "no RDMA device for the filter to leave out: " + unusableReason() : "");
  if (!why.empty()) GTEST_SKIP() << why;
  const auto [st, error] = initWith({{"hca", "=no_such_hca"}});
  EXPECT_EQ(st, PB_ERR_UNSUPPORTED) << error;
  EXPECT_NE(error.find("rank 3 (host hostx)"), std::string::npos) << error;
  EXPECT_NE(error.find("port 1: not selected by ib-verbs.hca (only no_such_hca)"), std::string::npos) << error;
}

}  // namespace
