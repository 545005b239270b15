// libplugboard-nvls.so through its C ABI only, as the core loads it:
// dlopen, a fake host-services table, no core library. What runs on any
// machine: the table (PB_CAP_GROUP, the group entries present, no pair
// operations), the gate through the real .so (NCCL_NVLS_ENABLE=0 /
// PLUGBOARD_NVLS_ENABLE=0 set by the test: refusing only), and what
// group_can_create says about this machine. No test here ever calls
// group_create with the gate open: multicast objects are created only by
// the fake-driver unit tests (tests/unit/nvls_group_test.cpp).
#include <gtest/gtest.h>
#include <plugboard/transport.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "env_guard.hpp"
#include "plugin_test_support.hpp"

#ifndef PLUGBOARD_NVLS_PLUGIN
#error "PLUGBOARD_NVLS_PLUGIN must name libplugboard-nvls.so"
#endif

namespace {

using plugboard::test::EnvGuard;
using plugboard::test::FakeHost;

const pb_transport_v1* table() {
  static const pb_transport_v1* t = plugboard::test::loadPluginTable(PLUGBOARD_NVLS_PLUGIN);
  return t;
}

/// A context of the plugin for one test, finalized at the end.
class NvlsPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    t_ = table();
    ASSERT_NE(t_, nullptr);
  }
  void TearDown() override {
    if (ctx_) {
      EXPECT_EQ(t_->finalize(ctx_), PB_OK) << t_->last_error(ctx_);
    }
  }
  /// init with these settings; false (with the reason recorded) when init refuses.
  bool init(std::map<std::string, std::string> settings = {}) {
    host_ = std::make_unique<FakeHost>(0, "host-a", std::move(settings));
    const pb_status st = t_->init(&host_->services, &ctx_);
    EXPECT_EQ(st, PB_OK) << t_->last_error(nullptr);
    return st == PB_OK;
  }
  /// A group description for rank 0 of 2 on device 0 (no bootstrap).
  static pb_group_desc_v1 desc() {
    pb_group_desc_v1 d{};
    d.struct_size = sizeof(d);
    d.rank = 0;
    d.nranks = 2;
    d.cuda_device = 0;
    d.bytes = 1 << 20;
    return d;
  }
  /// group_can_create's cost; *why gets the reason.
  int canCreate(std::string* why) {
    const pb_group_desc_v1 d = desc();
    int cost = 7;
    char reason[256] = "untouched";
    EXPECT_EQ(t_->group_can_create(ctx_, &d, &cost, reason, sizeof(reason)), PB_OK) << t_->last_error(ctx_);
    *why = reason;
    return cost;
  }
  /// group_create with no bootstrap: only ever called where the gate refuses.
  pb_status createRefused(pb_group** group) {
    const pb_group_desc_v1 d = desc();
    pb_group_view_v1 view{};
    view.struct_size = sizeof(view);
    *group = reinterpret_cast<pb_group*>(uintptr_t(1));
    return t_->group_create(ctx_, &d, group, &view);
  }

  const pb_transport_v1* t_ = nullptr;
  std::unique_ptr<FakeHost> host_;
  pb_plugin_ctx* ctx_ = nullptr;
};

TEST_F(NvlsPlugin, TableIsAGroupTransport) {
  EXPECT_STREQ(t_->name, "nvls");
  EXPECT_EQ(t_->abi_major, 1u);
  EXPECT_GE(t_->abi_minor, 4u);
  ASSERT_TRUE(PB_HAS_FIELD(t_, pb_transport_v1, group_destroy));
  EXPECT_NE(t_->group_can_create, nullptr);
  EXPECT_NE(t_->group_create, nullptr);
  EXPECT_NE(t_->group_destroy, nullptr);
  EXPECT_EQ(t_->write_signal, nullptr);
  EXPECT_EQ(t_->remote_pointer, nullptr);
}

TEST_F(NvlsPlugin, InitTouchesNoCudaAndDeclaresItsSettings) {
  ASSERT_TRUE(init());
  ASSERT_EQ(host_->declared.count("enable"), 1u);
  EXPECT_EQ(host_->declared["enable"].type, PB_SETTING_BOOL);
  EXPECT_EQ(host_->declared["enable"].defaultValue, "1");
  ASSERT_EQ(host_->declared.count("handle_type"), 1u);
  EXPECT_EQ(host_->declared["handle_type"].defaultValue, "auto");
  pb_transport_properties_v1 props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(t_->properties(ctx_, &props), PB_OK);
  EXPECT_EQ(props.flags, uint32_t(PB_CAP_GROUP));
  EXPECT_EQ(props.mem_types, 0u);  // registers nothing, so the core never offers it a buffer
  EXPECT_GT(props.bandwidth_gbps, 0.0);
  EXPECT_GT(props.latency_us, 0.0);
}

TEST_F(NvlsPlugin, InitRefusesABadHandleType) {
  FakeHost host(0, "host-a", {{"handle_type", "dmabuf"}});
  pb_plugin_ctx* ctx = nullptr;
  EXPECT_EQ(t_->init(&host.services, &ctx), PB_ERR_INVALID);
  EXPECT_NE(std::string(t_->last_error(nullptr)).find("handle_type 'dmabuf'"), std::string::npos);
}

TEST_F(NvlsPlugin, RefusesEveryPairOperation) {
  ASSERT_TRUE(init());
  plugboard::test::Peer peer(0, 1, "host-a", "host-a");
  int cost = 5;
  char reason[256] = "";
  ASSERT_EQ(t_->can_connect(ctx_, &peer.info, &cost, reason, sizeof(reason)), PB_OK);
  EXPECT_EQ(cost, -1);
  // Where a gate variable is set (the lent GPU machines) its refusal comes first.
  EXPECT_NE(std::string(reason).find("nvls connects a group of GPUs through a SwitchChannel, not pairs"),
            std::string::npos) << reason;

  pb_conn* conn = nullptr;
  char addr[64];
  size_t len = sizeof(addr);
  EXPECT_EQ(t_->setup(ctx_, &peer.info, &conn, addr, &len), PB_ERR_UNSUPPORTED);
  EXPECT_EQ(conn, nullptr);
  EXPECT_NE(std::string(t_->last_error(ctx_)).find("not pairs"), std::string::npos) << t_->last_error(ctx_);
  char buf[16];
  pb_mr* mr = nullptr;
  EXPECT_EQ(t_->register_memory(ctx_, buf, sizeof(buf), PB_MEM_CUDA, &mr), PB_ERR_UNSUPPORTED);
  EXPECT_EQ(mr, nullptr);
  EXPECT_EQ(t_->group_destroy(ctx_, nullptr), PB_ERR_INVALID);
  EXPECT_NE(std::string(t_->last_error(ctx_)).find("group must not be NULL"), std::string::npos);
}

TEST_F(NvlsPlugin, NcclVariableRefusesGroupsThroughTheRealPlugin) {
  EnvGuard env;
  env.set("NCCL_NVLS_ENABLE", "0");  // only ever restricts
  ASSERT_TRUE(init());
  std::string why;
  EXPECT_EQ(canCreate(&why), -1);
  EXPECT_EQ(why, "disabled by NCCL_NVLS_ENABLE=0");
  pb_group* group = nullptr;
  EXPECT_EQ(createRefused(&group), PB_ERR_UNSUPPORTED);
  EXPECT_EQ(group, nullptr);
  EXPECT_NE(std::string(t_->last_error(ctx_)).find("disabled by NCCL_NVLS_ENABLE=0"), std::string::npos)
      << t_->last_error(ctx_);
  EXPECT_TRUE(host_->logged({"disabled by NCCL_NVLS_ENABLE=0"})) << host_->allLogs();
  plugboard::test::Peer peer(0, 1, "host-a", "host-a");
  int cost = 5;
  char reason[256] = "";
  ASSERT_EQ(t_->can_connect(ctx_, &peer.info, &cost, reason, sizeof(reason)), PB_OK);
  EXPECT_EQ(cost, -1);
  EXPECT_EQ(std::string(reason).rfind("disabled by NCCL_NVLS_ENABLE=0; and nvls connects", 0), 0u) << reason;
}

TEST_F(NvlsPlugin, GateVariableSetAfterInitStillRefuses) {
  ASSERT_TRUE(init());
  EnvGuard env;
  env.set("PLUGBOARD_NVLS_ENABLE", "false");  // read at every call, not cached at init
  std::string why;
  EXPECT_EQ(canCreate(&why), -1);
  EXPECT_NE(why.find("disabled by"), std::string::npos) << why;
  if (!std::getenv("NCCL_NVLS_ENABLE")) {
    EXPECT_EQ(why, "disabled by PLUGBOARD_NVLS_ENABLE=false");
  }
  pb_group* group = nullptr;
  EXPECT_EQ(createRefused(&group), PB_ERR_UNSUPPORTED);
  EXPECT_EQ(group, nullptr);
}

TEST_F(NvlsPlugin, EnableSettingRefuses) {
  ASSERT_TRUE(init({{"enable", "0"}}));
  std::string why;
  EXPECT_EQ(canCreate(&why), -1);
  EXPECT_EQ(why.rfind("disabled", 0), 0u) << why;  // by the setting, or by the environment first
  pb_group* group = nullptr;
  EXPECT_EQ(createRefused(&group), PB_ERR_UNSUPPORTED);
  EXPECT_EQ(group, nullptr);
}

// What group_can_create says on this machine with the gate as the
// environment has it. It creates nothing either way; on a machine that
// could make a multicast group the test says so and stops there.
TEST_F(NvlsPlugin, SaysWhyThisMachineCannotMakeGroups) {
  ASSERT_TRUE(init());
  std::string why;
  const int cost = canCreate(&why);
  if (cost >= 0) GTEST_SKIP() << "this machine could create a multicast group (cost " << cost
                              << "); this test creates none";
  EXPECT_FALSE(why.empty());
  const bool gate = why.rfind("disabled", 0) == 0;
  const bool noGpu = why.find("no CUDA device") != std::string::npos;
  const bool noMulticast = why.find("does not support multicast") != std::string::npos ||
                           why.find("CUDA driver") != std::string::npos || why.find("cuDeviceGet") != std::string::npos;
  EXPECT_TRUE(gate || noGpu || noMulticast) << "unexpected reason: " << why;
  std::cout << "[ reason   ] group_can_create here: " << why << "\n";
}

}  // namespace
