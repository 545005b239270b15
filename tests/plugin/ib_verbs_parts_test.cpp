// The ib-verbs transport's parts that need no RDMA device (issue 16): the
// HCA filter in NCCL_IB_HCA's syntax, GID choice from a GID table, the
// address and key blobs with bad input, write striping, completion errors,
// the per-queue-pair post queues, the GPUDirect flush reads a signal waits
// for, the port nearest the GPU, which CUDA memory paths are open.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "completion.hpp"
#include "completion_router.hpp"
#include "cuda_memory.hpp"
#include "device.hpp"
#include "error.hpp"
#include "gid.hpp"
#include "gpu_flush.hpp"
#include "hca_filter.hpp"
#include "ib_verbs_test_support.hpp"
#include "nic_affinity.hpp"
#include "port_facts.hpp"
#include "post_queues.hpp"
#include "qp_plan.hpp"
#include "settings.hpp"
#include "striping.hpp"
#include "wire.hpp"

using namespace plugboard::ibverbs;

namespace {

/// Runs f, expects an Error with status whose text contains every needle.
template <typename F>
void expectError(F f, pb_status status, const std::vector<std::string>& needles) {
  try {
    f();
    FAIL() << "no error; expected one with '" << needles.front() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

std::array<uint8_t, 16> gidOf(std::initializer_list<int> bytes) {
  std::array<uint8_t, 16> g{};
  size_t i = 0;
  for (int b : bytes) g[i++] = static_cast<uint8_t>(b);
  return g;
}

std::array<uint8_t, 16> ipv4Mapped(int a, int b, int c, int d) {
  return gidOf({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d});
}

}  // namespace

// ---- HCA filter ------------------------------------------------------------

TEST(HcaFilter, EmptyMatchesEverything) {
  auto f = HcaFilter::parse("", "test");
  EXPECT_TRUE(f.matches("mlx5_0", 1));
  EXPECT_TRUE(f.matches("bnxt_re0", 2));
  EXPECT_EQ(f.describe(), "all devices and ports");
}

TEST(HcaFilter, NamesArePrefixesUnlessExact) {
  auto prefix = HcaFilter::parse("mlx5", "test");
  EXPECT_TRUE(prefix.matches("mlx5_0", 1));
  EXPECT_TRUE(prefix.matches("mlx5_1", 2));
  EXPECT_FALSE(prefix.matches("mlx4_0", 1));
  auto exact = HcaFilter::parse("=mlx5_1", "test");
  EXPECT_TRUE(exact.matches("mlx5_1", 1));
  EXPECT_FALSE(exact.matches("mlx5_10", 1));
  EXPECT_FALSE(exact.matches("mlx5_0", 1));
}

TEST(HcaFilter, PortsAndExclusion) {
  auto f = HcaFilter::parse(" mlx5_0:1 , mlx5_1 ", "test");
  EXPECT_TRUE(f.matches("mlx5_0", 1));
  EXPECT_FALSE(f.matches("mlx5_0", 2));
  EXPECT_TRUE(f.matches("mlx5_1", 2));
  EXPECT_EQ(f.describe(), "only mlx5_0* port 1, mlx5_1*");
  auto ex = HcaFilter::parse("^=mlx5_0:1", "test");
  EXPECT_FALSE(ex.matches("mlx5_0", 1));
  EXPECT_TRUE(ex.matches("mlx5_0", 2));
  EXPECT_TRUE(ex.matches("mlx5_1", 1));
  EXPECT_EQ(ex.describe(), "all but mlx5_0 port 1");
}

TEST(HcaFilter, BadSpecsNameTheEntryAndTheSource) {
  const std::string where = "ib-verbs.hca from PLUGBOARD_IB_VERBS_HCA";
  expectError([&] { HcaFilter::parse("mlx5_0:x", where); }, PB_ERR_INVALID, {"'mlx5_0:x'", "port 'x'", where});
  expectError([&] { HcaFilter::parse("mlx5_0:0", where); }, PB_ERR_INVALID, {"port '0'"});
  expectError([&] { HcaFilter::parse("mlx5_0:256", where); }, PB_ERR_INVALID, {"port '256'"});
  expectError([&] { HcaFilter::parse("mlx5_0,,mlx5_1", where); }, PB_ERR_INVALID, {"empty entry"});
  expectError([&] { HcaFilter::parse(":1", where); }, PB_ERR_INVALID, {"no device name"});
  expectError([&] { HcaFilter::parse("^", where); }, PB_ERR_INVALID, {"names no device"});
  std::string many;
  for (int i = 0; i < 33; ++i) many += (i ? "," : "") + std::string("d") + std::to_string(i);
  expectError([&] { HcaFilter::parse(many, where); }, PB_ERR_INVALID, {"more than 32 entries"});
}

// ---- GID choice -------------------------------------------------------------

TEST(GidChoice, RoceTakesTheFirstIpv4MappedV2Gid) {
  std::vector<GidRow> table = {
      {0, gidOf({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x42, 0xac, 0xff, 0xfe, 0x11, 0, 2}), IBV_GID_TYPE_ROCE_V1},
      {1, gidOf({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x42, 0xac, 0xff, 0xfe, 0x11, 0, 2}), IBV_GID_TYPE_ROCE_V2},
      {2, ipv4Mapped(192, 0, 2, 7), IBV_GID_TYPE_ROCE_V1},
      {3, ipv4Mapped(192, 0, 2, 7), IBV_GID_TYPE_ROCE_V2},
  };
  GidChoice c = chooseGid(table, IBV_LINK_LAYER_ETHERNET, -1, "mlx5_0 port 1");
  EXPECT_EQ(c.index, 3u);
  EXPECT_EQ(formatGid(c.gid), "::ffff:192.0.2.7");
  EXPECT_NE(c.reason.find("IPv4-mapped"), std::string::npos);
}

TEST(GidChoice, FallsBackToGlobalV6ThenV1AndRefusesLinkLocalOnly) {
  const auto global = gidOf({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  const auto linkLocal = gidOf({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9});
  EXPECT_EQ(chooseGid({{0, linkLocal, IBV_GID_TYPE_ROCE_V2}, {1, global, IBV_GID_TYPE_ROCE_V2}}, IBV_LINK_LAYER_ETHERNET,
                      -1, "p").index,
            1u);
  EXPECT_EQ(chooseGid({{0, linkLocal, IBV_GID_TYPE_ROCE_V1}, {1, linkLocal, IBV_GID_TYPE_ROCE_V2}},
                      IBV_LINK_LAYER_ETHERNET, -1, "p")
                .index,
            0u);
  expectError([&] { chooseGid({{0, linkLocal, IBV_GID_TYPE_ROCE_V2}, {1, {}, IBV_GID_TYPE_ROCE_V2}},
                              IBV_LINK_LAYER_ETHERNET, -1, "mlx5_0 port 1"); },
              PB_ERR_UNSUPPORTED, {"ib-verbs: mlx5_0 port 1", "without a usable GID", "0: RoCE v2 fe80:"});
}

TEST(GidChoice, ConfiguredIndexMustExistAndHoldAGid) {
  std::vector<GidRow> table = {{0, ipv4Mapped(10, 0, 0, 1), IBV_GID_TYPE_ROCE_V2}, {1, {}, IBV_GID_TYPE_ROCE_V2}};
  EXPECT_EQ(chooseGid(table, IBV_LINK_LAYER_ETHERNET, 0, "p").reason, "set by ib-verbs.gid_index");
  expectError([&] { chooseGid(table, IBV_LINK_LAYER_ETHERNET, 1, "mlx5_0 port 1"); }, PB_ERR_INVALID,
              {"gid_index 1 is empty", "::ffff:10.0.0.1"});
  expectError([&] { chooseGid(table, IBV_LINK_LAYER_ETHERNET, 7, "p"); }, PB_ERR_INVALID, {"gid_index 7 is not in"});
}

TEST(GidChoice, InfinibandUsesGidZero) {
  std::vector<GidRow> table = {{0, gidOf({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}), IBV_GID_TYPE_IB}};
  GidChoice c = chooseGid(table, IBV_LINK_LAYER_INFINIBAND, -1, "p");
  EXPECT_EQ(c.index, 0u);
  EXPECT_EQ(formatGid(c.gid), "fe80:0000:0000:0000:0102:0304:0506:0708");
}

// ---- blobs --------------------------------------------------------------------

TEST(IbWire, AddressRoundTripsAndEveryBadFieldIsNamed) {
  wire::AddressBlob a;
  a.rank = 5;
  a.lid = 0x1234;
  a.mtu = IBV_MTU_4096;
  a.linkLayer = IBV_LINK_LAYER_ETHERNET;
  a.gid = ipv4Mapped(10, 1, 2, 3);
  a.responderDepth = 16;
  a.qps = {{0x123456, 0x00abcd}, {0x000001, 0xffffff}};
  std::vector<uint8_t> buf(a.size());
  EXPECT_EQ(buf.size(), 36u + 16u);
  a.encode(buf.data());
  wire::AddressBlob b = wire::AddressBlob::decode(buf.data(), buf.size(), "rank 5 (host h)");
  EXPECT_EQ(b.rank, 5);
  EXPECT_EQ(b.lid, 0x1234);
  EXPECT_EQ(b.gid, a.gid);
  EXPECT_EQ(b.responderDepth, 16);
  ASSERT_EQ(b.qps.size(), 2u);
  EXPECT_EQ(b.qps[1].psn, 0xffffffu);

  const std::string from = "rank 5 (host h)";
  expectError([&] { wire::AddressBlob::decode(buf.data(), 10, from); }, PB_ERR_INVALID, {"less than a header", from});
  expectError([&] { wire::AddressBlob::decode(buf.data(), buf.size() - 1, from); }, PB_ERR_INVALID, {"for 2 queue pairs"});
  auto patched = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> c = buf;
    c[at] = v;
    return c;
  };
  auto magic = patched(0, 0);
  expectError([&] { wire::AddressBlob::decode(magic.data(), magic.size(), from); }, PB_ERR_INVALID, {"wrong magic"});
  auto version = patched(4, 9);
  expectError([&] { wire::AddressBlob::decode(version.data(), version.size(), from); }, PB_ERR_INVALID,
              {"format 9", "reads 2", "same Plugboard on every rank"});
  auto depth = patched(32, 0);
  expectError([&] { wire::AddressBlob::decode(depth.data(), depth.size(), from); }, PB_ERR_INVALID,
              {"responder depth of 0"});
  auto reserved = patched(34, 1);
  expectError([&] { wire::AddressBlob::decode(reserved.data(), reserved.size(), from); }, PB_ERR_INVALID,
              {"reserved bytes 33-35"});
  auto noQps = patched(6, 0);
  expectError([&] { wire::AddressBlob::decode(noQps.data(), noQps.size(), from); }, PB_ERR_INVALID, {"0 queue pairs"});
  auto mtu = patched(14, 9);
  expectError([&] { wire::AddressBlob::decode(mtu.data(), mtu.size(), from); }, PB_ERR_INVALID, {"MTU code 9"});
  auto layer = patched(15, 7);
  expectError([&] { wire::AddressBlob::decode(layer.data(), layer.size(), from); }, PB_ERR_INVALID, {"link layer 7"});
  auto wide = patched(wire::AddressBlob::kHeaderSize + 3, 1);  // qpn's fourth byte
  expectError([&] { wire::AddressBlob::decode(wide.data(), wide.size(), from); }, PB_ERR_INVALID, {"24 bits"});
}

TEST(IbWire, KeyRoundTripsAndBadKeysAreRefused) {
  wire::PackedKey k;
  k.memType = PB_MEM_CUDA;
  k.rkey = 0xdeadbeef;
  k.region = 7;
  k.base = 0x7f0000000000;
  k.size = 1 << 20;
  k.check = 0x1122334455667788;
  uint8_t buf[wire::PackedKey::kSize];
  k.encode(buf);
  wire::PackedKey d = wire::PackedKey::decode(buf, sizeof buf, "rank 1");
  EXPECT_EQ(d.rkey, k.rkey);
  EXPECT_EQ(d.base, k.base);
  EXPECT_EQ(d.check, k.check);
  expectError([&] { wire::PackedKey::decode(buf, 47, "rank 1"); }, PB_ERR_INVALID, {"47 bytes", "rank 1"});
  uint8_t type[sizeof buf];
  std::memcpy(type, buf, sizeof buf);
  type[6] = 9;
  expectError([&] { wire::PackedKey::decode(type, sizeof type, "rank 1"); }, PB_ERR_INVALID, {"memory type 9"});
  uint8_t reserved[sizeof buf];  // found by tools/fuzz.sh (fuzz_ib_verbs_wire): accepted, then encoded differently
  std::memcpy(reserved, buf, sizeof buf);
  reserved[15] = 1;
  expectError([&] { wire::PackedKey::decode(reserved, sizeof reserved, "rank 1"); }, PB_ERR_INVALID,
              {"reserved bytes 12-15 are not zero"});
  k.base = ~0ull - 10;
  k.size = 100;
  k.encode(buf);
  expectError([&] { wire::PackedKey::decode(buf, sizeof buf, "rank 1"); }, PB_ERR_INVALID, {"wraps around"});
}

// ---- striping and completions -----------------------------------------------

TEST(IbStriping, StripesCoverTheWriteInOrder) {
  auto check = [](uint64_t size, size_t qps, uint64_t min, size_t expectStripes) {
    auto s = stripeWrite(size, qps, min);
    ASSERT_EQ(s.size(), expectStripes) << size << " over " << qps;
    uint64_t at = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      EXPECT_EQ(s[i].qp, i);
      EXPECT_EQ(s[i].offset, at);
      if (i + 1 < s.size()) {
        EXPECT_EQ(s[i].length % 64, 0u);
      }
      at += s[i].length;
    }
    EXPECT_EQ(at, size);
  };
  check(0, 4, 128 << 10, 1);                 // an empty write still completes, on QP 0
  check(1000, 4, 128 << 10, 1);              // small: one QP
  check(256 << 10, 4, 128 << 10, 2);         // two stripes of the minimum
  check((8 << 20) + 3, 4, 128 << 10, 4);     // odd size over every QP
  check(8 << 20, 1, 128 << 10, 1);           // one QP
  check(130, 4, 1, 3);                       // 64-byte rounding leaves fewer stripes than QPs
}

TEST(IbCompletion, StatusesMapAndTextNamesEverything) {
  EXPECT_EQ(statusForCompletion(IBV_WC_SUCCESS), PB_OK);
  EXPECT_EQ(statusForCompletion(IBV_WC_RETRY_EXC_ERR), PB_ERR_REMOTE);
  EXPECT_EQ(statusForCompletion(IBV_WC_REM_ACCESS_ERR), PB_ERR_REMOTE);
  EXPECT_EQ(statusForCompletion(IBV_WC_WR_FLUSH_ERR), PB_ERR_REMOTE);
  EXPECT_EQ(statusForCompletion(IBV_WC_LOC_PROT_ERR), PB_ERR_INTERNAL);
  EXPECT_EQ(statusForCompletion(IBV_WC_FATAL_ERR), PB_ERR_SYSTEM);
}

// The text Connection::complete ends a connection with: composed by
// completionError from the parties it fills in.
TEST(IbCompletion, AFailedCompletionNamesBothEndsTheDeviceAndTheStatus) {
  CompletionParties p;
  p.operation = operationText(OpKind::WriteSignal, 2);
  p.port = "mlx5_3 port 1";
  p.localRank = 0;
  p.localHost = "node-a";
  p.peerRank = 5;
  p.peerHost = "node-b";
  const std::string t = completionError(IBV_WC_RETRY_EXC_ERR, p);
  EXPECT_EQ(t.rfind("ib-verbs: write with signal and its 2 GPUDirect flush read(s) of the peer's GPU memory from rank 0 "
                    "(host node-a) to rank 5 (host node-b) over mlx5_3 port 1 failed: " +
                        std::string(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR)) + " (status 12): the peer did not acknowledge",
                    0),
            0u)
      << t;
  EXPECT_NE(t.find("ib-verbs.timeout / retry_count"), std::string::npos) << t;
  p.operation = operationText(OpKind::Signal, 0);
  const std::string noHint = completionError(IBV_WC_GENERAL_ERR, p);
  EXPECT_EQ(noHint, "ib-verbs: signal (RDMA atomic add) from rank 0 (host node-a) to rank 5 (host node-b) over mlx5_3 "
                    "port 1 failed: " + std::string(ibv_wc_status_str(IBV_WC_GENERAL_ERR)) + " (status " +
                        std::to_string(IBV_WC_GENERAL_ERR) + ")");
  EXPECT_EQ(operationText(OpKind::Write, 0), "RDMA write");
}

// ---- settings and the queue-pair plan ---------------------------------------

namespace {

/// A lookup in a made-up table (settings by key, or variables by name).
std::function<std::optional<std::string>(const std::string&)> tableLookup(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const std::string& key) -> std::optional<std::string> {
    auto it = values.find(key);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

/// The settings these values give, in an environment that sets none of them.
IbSettings settingsFrom(const std::map<std::string, std::string>& values) {
  return parseSettings(tableLookup(values), tableLookup({}));
}

}  // namespace

TEST(IbSettings, DefaultsFollowNcclAndEveryKeyIsDeclared) {
  IbSettings s = settingsFrom({});
  EXPECT_EQ(s.gidIndex, -1);
  EXPECT_EQ(s.mtu, IBV_MTU_4096);
  EXPECT_EQ(s.timeout, 20);
  EXPECT_EQ(s.retryCount, 7);
  EXPECT_EQ(s.qpsPerConnection, 1);
  EXPECT_TRUE(s.hca.matches("anything", 1));
  EXPECT_TRUE(s.gdrFlush);
  EXPECT_EQ(settingSpecs().size(), 11u);
  s = settingsFrom({{"hca", "=mlx5_1:1"}, {"mtu", "1024"}, {"qps_per_connection", "4"}, {"traffic_class", "106"}});
  EXPECT_FALSE(s.hca.matches("mlx5_0", 1));
  EXPECT_EQ(s.mtu, IBV_MTU_1024);
  EXPECT_EQ(s.qpsPerConnection, 4);
  EXPECT_EQ(s.trafficClass, 106);
}

TEST(IbSettings, OutOfRangeValuesNameTheSettingAndTheRange) {
  expectError([] { settingsFrom({{"timeout", "0"}}); }, PB_ERR_INVALID, {"ib-verbs.timeout from", "'0'", "1 to 31"});
  expectError([] { settingsFrom({{"service_level", "16"}}); }, PB_ERR_INVALID, {"ib-verbs.service_level", "0 to 15"});
  expectError([] { settingsFrom({{"mtu", "1500"}}); }, PB_ERR_INVALID, {"ib-verbs.mtu from", "'1500'", "2048 or 4096"});
  expectError([] { settingsFrom({{"qps_per_connection", "two"}}); }, PB_ERR_INVALID, {"qps_per_connection", "'two'"});
  expectError([] { settingsFrom({{"hca", "mlx5_0:abc"}}); }, PB_ERR_INVALID, {"ib-verbs.hca", "port 'abc'"});
  expectError([] { settingsFrom({{"gdr_flush", "yes"}}); }, PB_ERR_INVALID, {"ib-verbs.gdr_flush from", "'yes'", "0 to 1"});
  EXPECT_FALSE(settingsFrom({{"gdr_flush", "0"}}).gdrFlush);
}

// The core names a plugin's settings "<plugin>.<key>" and reads
// PLUGBOARD_<PLUGIN>_<KEY> (the hyphen becomes '_'); get_setting does not
// say which source won, so the environment is compared with the value.
TEST(IbSettings, ABadValueSaysWhereItCameFrom) {
  EXPECT_EQ(settingName("hca"), "ib-verbs.hca");
  EXPECT_EQ(settingEnvName("qps_per_connection"), "PLUGBOARD_IB_VERBS_QPS_PER_CONNECTION");
  const auto env = tableLookup({{"PLUGBOARD_IB_VERBS_HCA", "mlx5_0:x"}});
  EXPECT_EQ(settingSource("hca", "mlx5_0:x", env), "ib-verbs.hca from PLUGBOARD_IB_VERBS_HCA");
  EXPECT_EQ(settingSource("hca", "mlx5_1", env), "ib-verbs.hca from the YAML config (ib-verbs: {hca: ...}) or the program")
      << "the variable holds other text: the value did not come from it";
  EXPECT_EQ(settingSource("mtu", "1500", env), "ib-verbs.mtu from the YAML config (ib-verbs: {mtu: ...}) or the program");
  const auto hca = tableLookup({{"hca", "mlx5_0:x"}});
  expectError([&] { parseSettings(hca, env); }, PB_ERR_INVALID,
              {"ib-verbs.hca from PLUGBOARD_IB_VERBS_HCA: 'mlx5_0:x' names port 'x'"});
  expectError([&] { parseSettings(hca, tableLookup({})); }, PB_ERR_INVALID,
              {"ib-verbs.hca from the YAML config (ib-verbs: {hca: ...}) or the program: 'mlx5_0:x'"});
}

TEST(IbQpPlan, TransitionsCarryTheRightAttributesAndMasks) {
  LocalPort roce;
  roce.port = 1;
  roce.activeMtu = IBV_MTU_4096;
  roce.linkLayer = IBV_LINK_LAYER_ETHERNET;
  roce.gid.index = 3;
  IbSettings set = settingsFrom({{"traffic_class", "106"}, {"service_level", "3"}, {"mtu", "2048"}});
  wire::AddressBlob peer;
  peer.mtu = IBV_MTU_4096;
  peer.linkLayer = IBV_LINK_LAYER_ETHERNET;
  peer.lid = 0;
  peer.gid = ipv4Mapped(10, 0, 0, 2);
  wire::QpInfo qp{0x1234, 0x777};

  QpStep init = initStep(roce);
  EXPECT_EQ(init.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(init.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  EXPECT_TRUE(init.attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE);
  EXPECT_TRUE(init.attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC);

  roce.responderDepth = 8;
  QpStep rtr = rtrStep(roce, peer, qp, set);
  EXPECT_EQ(rtr.attr.max_dest_rd_atomic, 8) << "what this end announced it takes";
  EXPECT_EQ(rtr.attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(rtr.attr.path_mtu, IBV_MTU_2048);  // the setting caps both ports' 4096
  EXPECT_EQ(rtr.attr.dest_qp_num, 0x1234u);
  EXPECT_EQ(rtr.attr.rq_psn, 0x777u);
  EXPECT_EQ(rtr.attr.ah_attr.is_global, 1);
  EXPECT_EQ(rtr.attr.ah_attr.grh.sgid_index, 3);
  EXPECT_EQ(rtr.attr.ah_attr.grh.traffic_class, 106);
  EXPECT_EQ(rtr.attr.ah_attr.sl, 3);
  EXPECT_EQ(0, std::memcmp(rtr.attr.ah_attr.grh.dgid.raw, peer.gid.data(), 16));
  EXPECT_EQ(rtr.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);

  LocalPort ib;
  ib.linkLayer = IBV_LINK_LAYER_INFINIBAND;
  ib.activeMtu = IBV_MTU_1024;
  peer.lid = 0x42;
  QpStep rtrIb = rtrStep(ib, peer, qp, settingsFrom({}));
  EXPECT_EQ(rtrIb.attr.ah_attr.is_global, 0);
  EXPECT_EQ(rtrIb.attr.ah_attr.dlid, 0x42);
  EXPECT_EQ(rtrIb.attr.path_mtu, IBV_MTU_1024);  // this port's active MTU is the smallest

  roce.initiatorDepth = 16;
  peer.responderDepth = 4;
  EXPECT_EQ(initiatorDepth(roce, peer), 4) << "no more outstanding than the peer takes";
  peer.responderDepth = 16;
  roce.initiatorDepth = 2;
  EXPECT_EQ(initiatorDepth(roce, peer), 2) << "no more than this device initiates";
  EXPECT_EQ(rdAtomicDepth(0), 1);
  EXPECT_EQ(rdAtomicDepth(16), 16);
  EXPECT_EQ(rdAtomicDepth(255), 16);
  QpStep rts = rtsStep(0xabc, settingsFrom({{"timeout", "14"}, {"retry_count", "5"}}), 4);
  EXPECT_EQ(rts.attr.max_rd_atomic, 4);
  EXPECT_EQ(rts.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(rts.attr.sq_psn, 0xabcu);
  EXPECT_EQ(rts.attr.timeout, 14);
  EXPECT_EQ(rts.attr.retry_cnt, 5);
  EXPECT_EQ(rts.mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC);
}

TEST(IbDevice, PortSpeedFromTheSpeedAndWidthCodes) {
  EXPECT_DOUBLE_EQ(portGbps(32, 2), 103.125);  // EDR 4x
  EXPECT_DOUBLE_EQ(portGbps(64, 2), 200.0);    // HDR 4x
  EXPECT_DOUBLE_EQ(portGbps(128, 2), 400.0);   // NDR 4x
  EXPECT_DOUBLE_EQ(portGbps(128, 16), 200.0);  // NDR 2x
  EXPECT_DOUBLE_EQ(portGbps(1, 1), 2.5);       // SDR 1x
  EXPECT_EQ(portGbps(3, 2), 0.0);              // unknown speed code
  EXPECT_EQ(portGbps(32, 3), 0.0);             // unknown width code
}

TEST(IbDevice, NamesOfLinkLayersStatesAndMtus) {
  EXPECT_EQ(linkLayerName(IBV_LINK_LAYER_INFINIBAND), "InfiniBand");
  EXPECT_EQ(linkLayerName(IBV_LINK_LAYER_ETHERNET), "RoCE");
  EXPECT_EQ(linkLayerName(9), "unknown link layer 9");
  EXPECT_EQ(portStateName(IBV_PORT_ACTIVE), "ACTIVE");
  EXPECT_EQ(portStateName(IBV_PORT_DOWN), "DOWN");
  EXPECT_EQ(mtuBytes(IBV_MTU_256), 256);
  EXPECT_EQ(mtuBytes(IBV_MTU_4096), 4096);
  PortInfo p;
  p.device = "mlx5_0";
  p.linkLayer = IBV_LINK_LAYER_ETHERNET;
  p.gbps = 100;
  p.gid.index = 3;
  p.gid.gid = gidOf({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1});
  p.gid.reason = "RoCE v2, IPv4-mapped";
  EXPECT_EQ(p.describe(), "mlx5_0 port 1: RoCE, 100 Gb/s, MTU 4096, GID 3 ::ffff:192.0.2.1 (RoCE v2, IPv4-mapped)");
}

namespace {

/// An active RoCE v2 port with an IPv4-mapped GID on a device with atomics:
/// usable unless a test changes a fact.
PortFacts roceFacts(const std::string& device, uint8_t port) {
  PortFacts f;
  f.device = device;
  f.port = port;
  f.deviceAttr.atomic_cap = IBV_ATOMIC_HCA;
  f.deviceAttr.max_qp_init_rd_atom = 16;
  f.deviceAttr.max_qp_rd_atom = 8;
  f.attr.state = IBV_PORT_ACTIVE;
  f.attr.link_layer = IBV_LINK_LAYER_ETHERNET;
  f.attr.active_mtu = IBV_MTU_1024;
  f.attr.active_speed = 64;  // HDR
  f.attr.active_width = 2;   // 4x
  f.gids = {{0, ipv4Mapped(10, 0, 0, static_cast<int>(port)), IBV_GID_TYPE_ROCE_V2}};
  return f;
}

/// The RDMA devices the kernel lists in sysfs (none where the class is absent).
std::vector<std::string> sysfsRdmaDevices() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/infiniband", ec))
    out.push_back(e.path().filename().string());
  return out;
}

}  // namespace

// Each reason a port is skipped, on made-up ports, in the order discovery checks them.
TEST(IbDevice, EachPortIsKeptOrSkippedWithItsReason) {
  std::vector<PortFacts> ports = {roceFacts("mlx5_0", 1), roceFacts("mlx5_0", 2), roceFacts("mlx5_1", 1),
                                  roceFacts("mlx5_2", 1), roceFacts("mlx5_3", 1), roceFacts("mlx5_4", 1)};
  ports[1].attr.state = IBV_PORT_DOWN;
  ports[2].deviceAttr.atomic_cap = IBV_ATOMIC_NONE;
  ports[3].portError = "ibv_query_port failed: No such device";
  ports[4].gids = {{0, gidOf({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}), IBV_GID_TYPE_ROCE_V2}};
  ports[5].gidError = "ibv_query_gid_table failed: Invalid argument";
  Discovery d;
  for (const PortFacts& f : ports) judgePort(f, settingsFrom({}), d);
  ASSERT_EQ(d.usable.size(), 1u);
  EXPECT_EQ(d.usable[0].describe(),
            "mlx5_0 port 1: RoCE, 200 Gb/s, MTU 1024, GID 0 ::ffff:10.0.0.1 (RoCE v2, IPv4-mapped (the first such))");
  EXPECT_EQ(d.usable[0].initiatorDepth, 16);
  EXPECT_EQ(d.usable[0].responderDepth, 8);
  ASSERT_EQ(d.skipped.size(), 5u);
  EXPECT_EQ(d.skipped[0], "mlx5_0 port 2: state DOWN");
  EXPECT_EQ(d.skipped[1], "mlx5_1 port 1: the device has no RDMA atomics (atomic_cap NONE), which signals need");
  EXPECT_EQ(d.skipped[2], "mlx5_2 port 1: ibv_query_port failed: No such device");
  EXPECT_EQ(d.skipped[3].rfind("mlx5_3 port 1: ib-verbs: mlx5_3 port 1: RoCE port without a usable GID", 0), 0u) << d.skipped[3];
  EXPECT_EQ(d.skipped[4], "mlx5_4 port 1: ibv_query_gid_table failed: Invalid argument");
  EXPECT_EQ(d.whyNone().rfind("no usable RDMA port: [mlx5_0 port 2: state DOWN] [mlx5_1 port 1: ", 0), 0u)
      << d.whyNone();
}

// A filter that selects no port names itself on every port, before any other reason.
TEST(IbDevice, AFilterThatSelectsNothingIsTheReasonForEveryPort) {
  PortFacts down = roceFacts("mlx5_1", 1);
  down.attr.state = IBV_PORT_DOWN;
  Discovery d;
  for (const PortFacts& f : {roceFacts("mlx5_0", 1), down}) judgePort(f, settingsFrom({{"hca", "=no_such_hca"}}), d);
  EXPECT_TRUE(d.usable.empty());
  ASSERT_EQ(d.skipped.size(), 2u);
  EXPECT_EQ(d.skipped[0], "mlx5_0 port 1: not selected by ib-verbs.hca (only no_such_hca)");
  EXPECT_EQ(d.skipped[1], "mlx5_1 port 1: not selected by ib-verbs.hca (only no_such_hca)");
  Discovery second;
  judgePort(roceFacts("mlx5_0", 2), settingsFrom({{"hca", "mlx5_0:1"}}), second);
  EXPECT_EQ(second.skipped.at(0), "mlx5_0 port 2: not selected by ib-verbs.hca (only mlx5_0* port 1)");
}

// Discovery on this host names no device the kernel does not list, and
// with none listed says exactly that.
TEST(IbDevice, DiscoveryOnThisHostAgreesWithSysfs) {
  const std::vector<std::string> listed = sysfsRdmaDevices();
  const Discovery d = discoverPorts(IbSettings{});
  if (listed.empty()) {
    EXPECT_TRUE(d.usable.empty()) << d.usable.front().describe();
    EXPECT_TRUE(d.skipped.empty()) << d.whyNone();
    EXPECT_EQ(d.whyNone(), "ibv_get_device_list found no RDMA device on this host");
    return;
  }
  auto isListed = [&](const std::string& line) {
    for (const auto& dev : listed)
      if (line.rfind(dev + ":", 0) == 0 || line.rfind(dev + " port ", 0) == 0) return true;
    return false;
  };
  for (const auto& p : d.usable) EXPECT_TRUE(isListed(p.name())) << p.describe();
  for (const auto& line : d.skipped) EXPECT_TRUE(isListed(line)) << line;
}

// The filter on this host's real ports: each one is named with it.
TEST(IbDevice, AFilterThatSelectsNothingNamesItselfOnThisHostsPorts) {
  const Discovery all = discoverPorts(IbSettings{});
  const std::string why = plugboard::test::ibVerbsSkipReason(
      all.usable.empty() && all.skipped.empty() ? "no RDMA port on this host for the filter to leave out: " + all.whyNone()
                                                 : "");
  if (!why.empty()) GTEST_SKIP() << why;
  IbSettings s;
  s.hca = HcaFilter::parse("=no_such_hca", "test");
  const Discovery none = discoverPorts(s);
  EXPECT_TRUE(none.usable.empty());
  size_t ports = 0;
  for (const auto& line : none.skipped) {
    if (line.find(" port ") == std::string::npos) continue;  // a device that did not open
    ++ports;
    EXPECT_NE(line.find("not selected by ib-verbs.hca (only no_such_hca)"), std::string::npos) << line;
  }
  EXPECT_EQ(ports, all.usable.size() + all.skipped.size()) << "every port found unfiltered is named filtered";
}

namespace {

ibv_wc completion(uint32_t qp, uint64_t wrId) {
  ibv_wc wc{};
  wc.qp_num = qp;
  wc.wr_id = wrId;
  wc.status = IBV_WC_SUCCESS;
  return wc;
}

}  // namespace

// The shared completion queue's routing: each completion reaches the
// connection of its queue pair, in arrival order; a detached connection's
// leftovers are dropped and its entries given back.
TEST(IbCompletionRouter, CompletionsReachTheirConnectionInOrder) {
  CompletionRouter r;
  const uint64_t a = r.attach({11, 12}, 512), b = r.attach({21}, 256);
  EXPECT_NE(a, b);
  EXPECT_EQ(r.entriesNeeded(), 768u);
  for (const auto& wc : {completion(11, 1), completion(21, 7), completion(12, 2), completion(11, 3)}) EXPECT_TRUE(r.route(wc));
  EXPECT_FALSE(r.route(completion(99, 5))) << "no connection has queue pair 99";
  std::vector<ibv_wc> got;
  r.take(a, got);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(got[1].wr_id, 2u);
  EXPECT_EQ(got[2].wr_id, 3u);
  r.take(a, got);
  EXPECT_TRUE(got.empty()) << "taken once";
  r.detach(b);
  EXPECT_EQ(r.entriesNeeded(), 512u);
  EXPECT_FALSE(r.route(completion(21, 8))) << "a destroyed queue pair's late completion is dropped";
  r.take(b, got);
  EXPECT_TRUE(got.empty());
  // A queue-pair number the device hands out again belongs to its new owner.
  const uint64_t c = r.attach({21}, 256);
  EXPECT_TRUE(r.route(completion(21, 9)));
  r.take(c, got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 9u);
  r.detach(a);
  r.detach(a);  // twice is harmless
  EXPECT_EQ(r.entriesNeeded(), 256u);
}

TEST(IbCompletionRouter, QueueSizesArePowersOfTwoWithinTheDevice) {
  EXPECT_EQ(completionQueueSize(0, 65536, 4194303, "mlx5_0 port 1"), 65536);
  EXPECT_EQ(completionQueueSize(65537, 0, 4194303, "mlx5_0 port 1"), 131072);
  EXPECT_EQ(completionQueueSize(0, 65536, 32767, "dev"), 32767) << "capped by max_cqe";
  EXPECT_EQ(completionQueueSize(30000, 0, 32767, "dev"), 32767);
  try {
    completionQueueSize(40000, 0, 32767, "mlx5_0 port 1");
    ADD_FAILURE() << "40000 entries on a device of 32767";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), PB_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("need a completion queue of 40000 entries, the device's hold at most 32767"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mlx5_0 port 1"), std::string::npos) << e.what();
  }
}

// The post queues (post_queues.hpp): posts recorded as "qp:name".
namespace {
using Posted = std::vector<std::string>;
void pumpInto(PostQueues<std::string>& q, Posted& posted) {
  q.pump([&](size_t qp, std::string& r) { posted.push_back(std::to_string(qp) + ":" + r); });
}
}  // namespace

TEST(IbPostQueues, AFullQueuePairHoldsOnlyItsOwnRequests) {
  PostQueues<std::string> q(2, 2);
  for (const char* r : {"a", "b", "c"}) q.push(0, r, false);
  q.push(1, "x", false);
  Posted posted;
  pumpInto(q, posted);
  EXPECT_EQ(posted, (Posted{"0:a", "0:b", "1:x"}));
  EXPECT_EQ(q.inFlight(0), 2u);
  EXPECT_EQ(q.waiting(0), 1u);
  pumpInto(q, posted);  // nothing completed: nothing more
  EXPECT_EQ(posted.size(), 3u);
  EXPECT_TRUE(q.completed(0));
  pumpInto(q, posted);
  EXPECT_EQ(posted.back(), "0:c");
  EXPECT_TRUE(q.completed(1));
  EXPECT_FALSE(q.completed(1)) << "queue pair 1 had nothing more in flight";
  EXPECT_FALSE(q.completed(7)) << "no such queue pair";
}

TEST(IbPostQueues, ADrainWaitsForEarlierWorkOnTheOtherQueuePairsOnly) {
  PostQueues<std::string> q(3, 8);
  q.push(1, "w1", false);
  q.push(2, "w2", false);
  q.push(0, "signal", true);
  q.push(1, "later1", false);  // after the signal on another queue pair: goes on
  q.push(0, "later0", false);  // behind the signal on its queue pair: waits
  Posted posted;
  pumpInto(q, posted);
  EXPECT_EQ(posted, (Posted{"1:w1", "1:later1", "2:w2"}));
  EXPECT_TRUE(q.completed(1));  // w1
  pumpInto(q, posted);
  EXPECT_EQ(posted.size(), 3u) << "w2 has not completed";
  EXPECT_TRUE(q.completed(2));  // w2; later1 is still in flight and came after the signal
  pumpInto(q, posted);
  EXPECT_EQ(posted, (Posted{"1:w1", "1:later1", "2:w2", "0:signal", "0:later0"}));
}

TEST(IbPostQueues, ADrainWithNothingBeforeItGoesAtOnce) {
  PostQueues<std::string> q(2, 4);
  q.push(0, "signal", true);
  Posted posted;
  pumpInto(q, posted);
  EXPECT_EQ(posted, (Posted{"0:signal"}));
  // Work completed before a drain is queued does not hold it.
  q.push(1, "w", false);
  pumpInto(q, posted);
  EXPECT_TRUE(q.completed(1));
  q.push(0, "signal2", true);
  pumpInto(q, posted);
  EXPECT_EQ(posted.back(), "0:signal2");
}

TEST(IbPostQueues, APostThatThrowsLeavesItsRequestQueued) {
  PostQueues<std::string> q(1, 4);
  q.push(0, "a", false);
  EXPECT_THROW(q.pump([](size_t, std::string&) { throw std::runtime_error("post failed"); }), std::runtime_error);
  EXPECT_EQ(q.waiting(0), 1u);
  EXPECT_EQ(q.inFlight(0), 0u);
}

// ---- GPUDirect flush reads -------------------------------------------------

TEST(IbGpuFlush, HostWritesAndEmptyWritesNeedNoFlush) {
  GpuFlushTracker t(2);
  t.wrote(0, false, 1, 0x11, 0x1000, 4096);  // host memory: PCIe keeps it ordered with the signal
  t.wrote(1, true, 2, 0x22, 0x2000, 0);      // no bytes
  EXPECT_TRUE(t.empty());
  EXPECT_TRUE(t.take().empty());
}

TEST(IbGpuFlush, OneReadPerQueuePairAndRegionOfTheLastWrittenByte) {
  GpuFlushTracker t(3);
  t.wrote(0, true, 7, 0x77, 0x1000, 100);
  t.wrote(0, true, 7, 0x77, 0x5000, 16);  // same region, same queue pair: one read, of the later write
  t.wrote(2, true, 7, 0x77, 0x9000, 8);   // same region on another queue pair: its own read
  t.wrote(0, true, 9, 0x99, 0x20000, 1);  // another region (maybe another GPU): its own read
  EXPECT_FALSE(t.empty());
  const std::vector<FlushRead> reads = t.take();
  ASSERT_EQ(reads.size(), 3u);
  EXPECT_EQ(reads[0].qp, 0u);
  EXPECT_EQ(reads[0].remoteAddr, 0x5000u + 15);
  EXPECT_EQ(reads[0].rkey, 0x77u);
  EXPECT_EQ(reads[1].qp, 0u);
  EXPECT_EQ(reads[1].remoteAddr, 0x20000u);
  EXPECT_EQ(reads[1].rkey, 0x99u);
  EXPECT_EQ(reads[2].qp, 2u);
  EXPECT_EQ(reads[2].remoteAddr, 0x9000u + 7);
  EXPECT_TRUE(t.empty()) << "take() forgets what it returned";
  EXPECT_TRUE(t.take().empty()) << "a second signal with no write between needs no flush";
}

TEST(IbGpuFlush, ASignalWaitsForEveryQueuePairsReadThroughThePostQueues) {
  // The connection's order: writes, then the flush reads, then the atomic
  // (draining the other queue pairs). The atomic must not go before the
  // read on queue pair 1 completed.
  GpuFlushTracker t(2);
  PostQueues<std::string> q(2, 8);
  q.push(0, "write0", false);
  q.push(1, "write1", false);
  t.wrote(0, true, 1, 0x1, 0x1000, 64);
  t.wrote(1, true, 1, 0x1, 0x2000, 64);
  for (const FlushRead& f : t.take()) q.push(f.qp, "read" + std::to_string(f.qp), false);
  q.push(0, "signal", true);
  Posted posted;
  pumpInto(q, posted);
  EXPECT_EQ(posted, (Posted{"0:write0", "0:read0", "1:write1", "1:read1"}));
  EXPECT_TRUE(q.completed(1));  // write1
  pumpInto(q, posted);
  EXPECT_EQ(posted.size(), 4u) << "read1 has not returned";
  EXPECT_TRUE(q.completed(1));  // read1
  pumpInto(q, posted);
  EXPECT_EQ(posted.back(), "0:signal");
}

// ---- CUDA memory: dma-buf or nvidia-peermem ---------------------------------

// The probe's answers as NCCL reads them: EOPNOTSUPP / EPROTONOSUPPORT mean
// the NIC (or its kernel) cannot register dma-bufs; EBADF for fd -1 means it can.
TEST(IbCudaMemory, TheProbeSaysWhetherTheNicRegistersDmabufs) {
  EXPECT_TRUE(nicRegistersDmabufs({false, EBADF}));
  EXPECT_TRUE(nicRegistersDmabufs({false, EINVAL}));
  EXPECT_TRUE(nicRegistersDmabufs({true, 0})) << "a region for fd -1: the device took the call";
  EXPECT_FALSE(nicRegistersDmabufs({false, EOPNOTSUPP}));
  EXPECT_FALSE(nicRegistersDmabufs({false, EPROTONOSUPPORT}));
}

TEST(IbCudaMemory, CudaMemoryIsAdvertisedOnlyWhereAPathIsOpen) {
  const DmabufProbe takes{false, EBADF}, refuses{false, EOPNOTSUPP};
  const CudaMemoryPaths both = cudaMemoryPaths(true, takes, true, "mlx5_0 port 1");
  EXPECT_TRUE(both.dmabuf && both.peerMemory && both.any());
  EXPECT_EQ(both.reason, "CUDA memory as dma-bufs, else through nvidia-peermem");
  const CudaMemoryPaths nicRefuses = cudaMemoryPaths(true, refuses, false, "mlx5_0 port 1");
  EXPECT_FALSE(nicRefuses.any()) << "the core exports dma-bufs, but this HCA cannot register them";
  EXPECT_EQ(nicRefuses.reason, "no CUDA memory: mlx5_0 port 1 cannot register dma-bufs (ibv_reg_dmabuf_mr: " +
                                   std::string(std::strerror(EOPNOTSUPP)) +
                                   "), and no nvidia_peermem module is loaded (the core stages GPU buffers through "
                                   "host memory)");
  const CudaMemoryPaths peer = cudaMemoryPaths(true, {false, EPROTONOSUPPORT}, true, "rxe0 port 1");
  EXPECT_FALSE(peer.dmabuf);
  EXPECT_TRUE(peer.peerMemory && peer.any());
  EXPECT_NE(peer.reason.find("through nvidia-peermem (not as dma-bufs: rxe0 port 1 cannot register dma-bufs"),
            std::string::npos) << peer.reason;
  const CudaMemoryPaths noCore = cudaMemoryPaths(false, takes, false, "mlx5_0 port 1");
  EXPECT_FALSE(noCore.any());
  EXPECT_NE(noCore.reason.find("the core cannot export this GPU's memory as dma-bufs"), std::string::npos)
      << noCore.reason;
  EXPECT_TRUE(cudaMemoryPaths(true, takes, false, "p").dmabuf);
}

// ---- The port nearest the GPU ------------------------------------------------

namespace {

PortInfo portAt(const std::string& device, const std::string& path, int numa = -1) {
  PortInfo p;
  p.device = device;
  p.pciPlace = {path, numa};
  return p;
}

}  // namespace

TEST(IbNicAffinity, DistanceCountsHopsThroughTheDeepestCommonBridge) {
  const std::string sw = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";  // a PCIe switch
  const PciPlace gpu{sw + "/0000:02:08.0/0000:3b:00.0", 0};
  EXPECT_EQ(pciDistance(gpu, {sw + "/0000:02:08.0/0000:3c:00.0", 0}), 2) << "same switch port";
  EXPECT_EQ(pciDistance(gpu, {sw + "/0000:02:10.0/0000:5e:00.0", 0}), 4) << "same switch, other port";
  EXPECT_EQ(pciDistance(gpu, {"/sys/devices/pci0000:00/0000:00:02.0/0000:70:00.0", 0}), 6) << "same root complex";
  EXPECT_EQ(pciDistance(gpu, {"/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0", 0}), 12)
      << "another root complex of the same NUMA node: both depths";
  EXPECT_EQ(pciDistance(gpu, {"/sys/devices/pci0000:80/0000:80:00.0/0000:81:00.0", 1}), 12 + 64)
      << "another socket";
  EXPECT_EQ(pciDistance(gpu, {"/sys/devices/pci0000:80/0000:80:00.0/0000:81:00.0", -1}), 12)
      << "NUMA unknown: no socket penalty";
  EXPECT_EQ(pciDistance(gpu, {"", 0}), -1);
  EXPECT_EQ(pciDistance({"", -1}, gpu), -1);
  EXPECT_EQ(pciDistance(gpu, gpu), 0);
}

TEST(IbNicAffinity, EachGpuTakesItsNearestPortAndTiesKeepDiscoveryOrder) {
  // Two GPUs, each beside one NIC behind its own switch, a dual-port NIC
  // on the other socket and a software device with no PCI function.
  const std::string a = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  const std::string b = "/sys/devices/pci0000:00/0000:00:03.0/0000:41:00.0";
  const std::vector<PortInfo> ports = {
      portAt("rxe0", ""),
      portAt("mlx5_far", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", 1),
      portAt("mlx5_far", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", 1),
      portAt("mlx5_a", a + "/0000:02:00.0/0000:03:00.0", 0),
      portAt("mlx5_b", b + "/0000:42:00.0/0000:43:00.0", 0),
  };
  PortPick pa = pickPort(ports, {a + "/0000:02:08.0/0000:3b:00.0", 0});
  EXPECT_EQ(pa.index, 3u) << pa.reason;
  EXPECT_EQ(pa.reason, "nearest the GPU (4 PCI hops)");
  EXPECT_EQ(pickPort(ports, {b + "/0000:42:08.0/0000:44:00.0", 0}).index, 4u);
  EXPECT_EQ(pickPort(ports, {"/sys/devices/pci0000:80/0000:80:02.0/0000:82:00.0", 1}).index, 1u)
      << "the dual-port NIC's first port";
  const PortPick none = pickPort(ports, {});
  EXPECT_EQ(none.index, 0u);
  EXPECT_NE(none.reason.find("first usable port"), std::string::npos) << none.reason;
  const PortPick unknown = pickPort({portAt("rxe0", ""), portAt("rxe1", "")}, {a, 0});
  EXPECT_EQ(unknown.index, 0u);
  EXPECT_NE(unknown.reason.find("no port's place"), std::string::npos) << unknown.reason;
}

TEST(IbNicAffinity, PlacesOnThisHostAreFoundOrEmpty) {
  EXPECT_TRUE(rdmaDevicePlace("no_such_hca").path.empty());
  EXPECT_TRUE(pciDevicePlace("").path.empty());
  EXPECT_TRUE(pciDevicePlace("../../etc").path.empty()) << "a bus id is a name, never a path";
  EXPECT_TRUE(pciDevicePlace("ffff:ff:1f.7").path.empty());
  // Any PCI function this host has resolves below /sys/devices.
  std::ifstream list("/proc/bus/pci/devices");
  if (!list) GTEST_SKIP() << "no /proc/bus/pci/devices here";
  unsigned bdf = 0;
  std::string line;
  if (!std::getline(list, line) || std::sscanf(line.c_str(), "%x", &bdf) != 1) GTEST_SKIP() << "no PCI device listed";
  char id[32];
  std::snprintf(id, sizeof id, "0000:%02x:%02x.%x", bdf >> 8, (bdf >> 3) & 0x1f, bdf & 7);
  const PciPlace p = pciDevicePlace(id);
  EXPECT_EQ(p.path.rfind("/sys/devices/", 0), 0u) << id << " -> '" << p.path << "'";
}
