// The nvls transport's parts that need neither GPU nor driver: the safety
// gate (NCCL_NVLS_ENABLE / PLUGBOARD_NVLS_ENABLE / nvls.enable), settings,
// the handle-kind choice, the all_gather record, the request checks and
// the size rounding. The creation flow against a fake driver table is in
// nvls_group_test.cpp. These tests only ever set the gate variables to
// "off" values (EnvGuard restores them); none enables multicast.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "env_guard.hpp"
#include "error.hpp"
#include "gate.hpp"
#include "group.hpp"
#include "handle_kind.hpp"
#include "request.hpp"
#include "settings.hpp"
#include "wire.hpp"

using namespace plugboard::nvls;
using plugboard::test::EnvGuard;

namespace {

/// Runs f, expects an Error with status whose text contains every needle.
template <typename F>
void expectError(F f, pb_status status, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one with '" << needles.front() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

/// Why the environment already forbids multicast ("" when it does not).
std::string environmentGate() { return disabledBy(""); }

// ---- the gate ---------------------------------------------------------------

TEST(NvlsGate, ReadsOffValuesInAnyCaseAndSpacing) {
  for (const char* off : {"0", "00", "-0", "false", "FALSE", "False", "no", "NO", "off", "Off", " 0 ", "\toff\n"})
    EXPECT_EQ(readSwitch(off), SwitchValue::Off) << "'" << off << "'";
}

TEST(NvlsGate, ReadsOnValuesUnsetAndUnreadable) {
  for (const char* on : {"1", "2", "true", "YES", "on", " 1 ", "+3"})
    EXPECT_EQ(readSwitch(on), SwitchValue::On) << "'" << on << "'";
  EXPECT_EQ(readSwitch(nullptr), SwitchValue::Unset);
  EXPECT_EQ(readSwitch(""), SwitchValue::Unset);
  EXPECT_EQ(readSwitch("  "), SwitchValue::Unset);
  for (const char* junk : {"maybe", "0x0", "1.0", "+", "of", "nope"})
    EXPECT_EQ(readSwitch(junk), SwitchValue::Unreadable) << "'" << junk << "'";
}

TEST(NvlsGate, NcclVariableRefusesWithItsValue) {
  for (const char* off : {"0", "false", "no", "off", "OFF", "False"}) {
    EnvGuard env;
    env.set("NCCL_NVLS_ENABLE", off);
    EXPECT_EQ(disabledBy("1"), std::string("disabled by NCCL_NVLS_ENABLE=") + off);
  }
}

TEST(NvlsGate, PlugboardVariableRefusesWithItsValue) {
  const SwitchValue nccl = readSwitch(std::getenv("NCCL_NVLS_ENABLE"));
  if (nccl == SwitchValue::Off || nccl == SwitchValue::Unreadable)
    GTEST_SKIP() << "NCCL_NVLS_ENABLE is set here (" << std::getenv("NCCL_NVLS_ENABLE")
                 << ") and is checked first; this test does not change it";
  for (const char* off : {"0", "false", "no", "off", "No"}) {
    EnvGuard env;
    env.set("PLUGBOARD_NVLS_ENABLE", off);
    EXPECT_EQ(disabledBy("1"), std::string("disabled by PLUGBOARD_NVLS_ENABLE=") + off);
  }
}

TEST(NvlsGate, NcclVariableIsNamedFirstWhenBothRefuse) {
  EnvGuard env;
  env.set("NCCL_NVLS_ENABLE", "0");
  env.set("PLUGBOARD_NVLS_ENABLE", "0");
  EXPECT_EQ(disabledBy("0"), "disabled by NCCL_NVLS_ENABLE=0");
}

TEST(NvlsGate, UnreadableVariableRefuses) {
  EnvGuard env;
  env.set("NCCL_NVLS_ENABLE", "maybe");
  const std::string why = disabledBy("1");
  EXPECT_EQ(why.rfind("disabled: NCCL_NVLS_ENABLE=maybe is not a boolean", 0), 0u) << why;
}

TEST(NvlsGate, SettingRefusesWhenTheEnvironmentSaysNothing) {
  if (!environmentGate().empty()) GTEST_SKIP() << "the environment already refuses: " << environmentGate();
  EXPECT_EQ(disabledBy(""), "");
  EXPECT_EQ(disabledBy("1"), "");
  EXPECT_EQ(disabledBy("0"), "disabled by nvls.enable=0");
  EXPECT_EQ(disabledBy("false"), "disabled by nvls.enable=false");
  EXPECT_EQ(disabledBy("bogus").rfind("disabled: nvls.enable=bogus", 0), 0u);
}

TEST(NvlsGate, ReadsTheEnvironmentAtEveryCall) {
  const std::string before = environmentGate();
  {
    EnvGuard env;
    env.set("NCCL_NVLS_ENABLE", "0");
    EXPECT_EQ(disabledBy("1"), "disabled by NCCL_NVLS_ENABLE=0");
  }
  EXPECT_EQ(environmentGate(), before);  // restored, and read again
}

// ---- settings -----------------------------------------------------------------

TEST(NvlsSettings, DeclaresEnableAndHandleType) {
  const auto& decls = settingDecls();
  ASSERT_EQ(decls.size(), 2u);
  EXPECT_STREQ(decls[0].key, "enable");
  EXPECT_EQ(decls[0].type, PB_SETTING_BOOL);
  EXPECT_STREQ(decls[0].default_value, "1");
  EXPECT_NE(std::string(decls[0].doc).find("NCCL_NVLS_ENABLE=0"), std::string::npos);
  EXPECT_STREQ(decls[1].key, "handle_type");
  EXPECT_EQ(decls[1].type, PB_SETTING_STRING);
  EXPECT_STREQ(decls[1].default_value, "auto");
  for (const auto& d : decls) EXPECT_EQ(d.struct_size, sizeof(pb_setting_decl_v1));
}

TEST(NvlsSettings, ReadsThroughTheLookup) {
  auto s = readSettings([](const char* key) { return std::string(key) == "enable" ? "0" : "fabric"; });
  EXPECT_EQ(s.enable, "0");
  EXPECT_EQ(s.handleType, HandlePreference::Fabric);
  s = readSettings([](const char*) { return std::string(); });
  EXPECT_EQ(s.handleType, HandlePreference::Auto);
  expectError([] { readSettings([](const char* key) { return std::string(key) == "enable" ? "1" : "dmabuf"; }); },
              PB_ERR_INVALID, {"handle_type 'dmabuf'", "auto, fabric, posix_fd"});
}

// ---- handle kind ----------------------------------------------------------------

std::string rankName(int r) { return "group rank " + std::to_string(r); }

HandleSupport support(HandlePreference p, bool fabric, bool fd) {
  HandleSupport s;
  s.preference = p;
  s.fabric = fabric;
  s.posixFd = fd;
  return s;
}

TEST(NvlsHandleKind, AutoPicksFabricOnlyWhenEveryRankHasIt) {
  using P = HandlePreference;
  EXPECT_EQ(chooseHandleKind({support(P::Auto, true, true), support(P::Auto, true, true)}, rankName),
            HandleKind::Fabric);
  EXPECT_EQ(chooseHandleKind({support(P::Auto, true, true), support(P::Auto, false, true)}, rankName),
            HandleKind::PosixFd);
  expectError([] { chooseHandleKind({support(P::Auto, true, false), support(P::Auto, false, true)}, rankName); },
              PB_ERR_UNSUPPORTED, {"group rank 1 cannot export fabric", "group rank 0 cannot export POSIX"});
}

TEST(NvlsHandleKind, NamedKindMustBeSupportedEverywhereAndAgreed) {
  using P = HandlePreference;
  EXPECT_EQ(chooseHandleKind({support(P::PosixFd, true, true), support(P::Auto, true, true)}, rankName),
            HandleKind::PosixFd);
  EXPECT_EQ(chooseHandleKind({support(P::Auto, true, true), support(P::Fabric, true, false)}, rankName),
            HandleKind::Fabric);
  expectError([] { chooseHandleKind({support(P::Fabric, true, true), support(P::Auto, false, true)}, rankName); },
              PB_ERR_UNSUPPORTED, {"handle_type=fabric", "group rank 1"});
  expectError(
      [] { chooseHandleKind({support(P::Fabric, true, true), support(P::PosixFd, true, true)}, rankName); },
      PB_ERR_INVALID, {"disagree on handle_type", "group rank 0 says fabric", "group rank 1 says posix_fd"});
}

TEST(NvlsHandleKind, Names) {
  EXPECT_EQ(parseHandlePreference("auto"), HandlePreference::Auto);
  EXPECT_EQ(parseHandlePreference("posix_fd"), HandlePreference::PosixFd);
  EXPECT_STREQ(preferenceName(HandlePreference::Fabric), "fabric");
  EXPECT_EQ(cuHandleType(HandleKind::Fabric), CU_MEM_HANDLE_TYPE_FABRIC);
  EXPECT_EQ(cuHandleType(HandleKind::PosixFd), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

// ---- the all_gather record --------------------------------------------------------

TEST(NvlsWire, ReportRoundTrips) {
  Report r;
  r.phase = Phase::Create;
  r.status = PB_ERR_SYSTEM;
  r.groupRank = 3;
  r.nranks = 4;
  r.device = 7;
  r.handlePreference = 2;
  r.fabric = 1;
  r.posixFd = 1;
  r.pid = 123456;
  r.fd = 42;
  r.bytes = (uint64_t(1) << 40) + 5;
  r.mcGranularity = 512 << 20;
  r.ucGranularity = 2 << 20;
  for (size_t i = 0; i < r.fabricHandle.size(); ++i) r.fabricHandle[i] = static_cast<uint8_t>(i * 3 + 1);
  r.what = "cuMulticastCreate: CUDA_ERROR_OUT_OF_MEMORY (driver error 2)";
  std::vector<uint8_t> buf(Report::kSize);
  r.pack(buf.data());
  EXPECT_EQ(buf[0], 0x50);  // "PBNV", little-endian
  const Report back = Report::unpack(buf.data());
  EXPECT_EQ(back.phase, r.phase);
  EXPECT_EQ(back.status, r.status);
  EXPECT_EQ(back.groupRank, 3);
  EXPECT_EQ(back.nranks, 4);
  EXPECT_EQ(back.device, 7);
  EXPECT_EQ(back.handlePreference, 2u);
  EXPECT_EQ(back.fabric, 1u);
  EXPECT_EQ(back.posixFd, 1u);
  EXPECT_EQ(back.pid, 123456u);
  EXPECT_EQ(back.fd, 42);
  EXPECT_EQ(back.bytes, r.bytes);
  EXPECT_EQ(back.mcGranularity, r.mcGranularity);
  EXPECT_EQ(back.ucGranularity, r.ucGranularity);
  EXPECT_EQ(back.fabricHandle, r.fabricHandle);
  EXPECT_EQ(back.what, r.what);
}

TEST(NvlsWire, LongTextIsTruncatedAndBadRecordsRefused) {
  Report r;
  r.what = std::string(1000, 'x');
  std::vector<uint8_t> buf(Report::kSize);
  r.pack(buf.data());
  EXPECT_EQ(Report::unpack(buf.data()).what.size(), Report::kWhatBytes - 1);
  buf[0] ^= 0xff;
  expectError([&] { Report::unpack(buf.data()); }, PB_ERR_REMOTE, {"wrong magic"});
  buf[0] ^= 0xff;
  buf[4] = 9;
  expectError([&] { Report::unpack(buf.data()); }, PB_ERR_REMOTE, {"version 9"});
}

// ---- the request ----------------------------------------------------------------------

pb_group_desc_v1 desc(int rank, int nranks, const int* commRanks = nullptr) {
  pb_group_desc_v1 d{};
  d.struct_size = sizeof(d);
  d.rank = rank;
  d.nranks = nranks;
  d.comm_ranks = commRanks;
  d.cuda_device = 0;
  d.bytes = 4096;
  return d;
}

TEST(NvlsRequest, CopiesAndNamesRanks) {
  const int comm[] = {4, 9, 2};
  auto d = desc(1, 3, comm);
  const GroupRequest r = GroupRequest::from(&d);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.nranks, 3);
  EXPECT_EQ(r.commRanks, (std::vector<int>{4, 9, 2}));
  EXPECT_EQ(r.describeSelf(), "group rank 1 (communicator rank 9)");
  auto plain = desc(0, 2);
  EXPECT_EQ(GroupRequest::from(&plain).describe(1), "group rank 1 (communicator rank 1)");
}

TEST(NvlsRequest, RefusesBadDescriptions) {
  expectError([] { GroupRequest::from(nullptr); }, PB_ERR_INVALID, {"must not be NULL"});
  auto d = desc(0, 2);
  d.struct_size = offsetof(pb_group_desc_v1, bytes);
  expectError([&] { GroupRequest::from(&d); }, PB_ERR_INVALID, {"too short"});
  d = desc(2, 2);
  expectError([&] { GroupRequest::from(&d); }, PB_ERR_INVALID, {"group rank 2 is outside 0..1"});
  d = desc(0, 0);
  expectError([&] { GroupRequest::from(&d); }, PB_ERR_INVALID, {"group of 0 ranks"});
  d = desc(0, 2);
  d.bytes = 0;
  expectError([&] { GroupRequest::from(&d); }, PB_ERR_INVALID, {"0 bytes"});
  d = desc(0, 2);
  d.cuda_device = -1;
  expectError([&] { GroupRequest::from(&d); }, PB_ERR_INVALID, {"not a device ordinal"});
}

// ---- rounding ----------------------------------------------------------------------------

TEST(NvlsRounding, RoundsUpToTheCommonGranularity) {
  constexpr uint64_t MiB = 1 << 20;
  EXPECT_EQ(commonGranularity({2 * MiB, 2 * MiB}), 2 * MiB);
  EXPECT_EQ(commonGranularity({2 * MiB, 512 * MiB, 2 * MiB}), 512 * MiB);
  EXPECT_EQ(commonGranularity({4 * MiB, 6 * MiB}), 12 * MiB);
  EXPECT_EQ(roundUp(1, 2 * MiB), 2 * MiB);
  EXPECT_EQ(roundUp(2 * MiB, 2 * MiB), 2 * MiB);
  EXPECT_EQ(roundUp(2 * MiB + 1, 2 * MiB), 4 * MiB);
  EXPECT_EQ(roundUp(0, 2 * MiB), 0u);
  expectError([] { commonGranularity({2 << 20, 0}); }, PB_ERR_INVALID, {"granularity of 0"});
  expectError([] { roundUp(std::numeric_limits<size_t>::max() - 5, 2 * MiB); }, PB_ERR_NOMEM, {"overflow"});
  expectError([] { commonGranularity({(uint64_t(1) << 63) + 1, (uint64_t(1) << 62) + 1}); }, PB_ERR_NOMEM,
              {"overflows"});
}

}  // namespace
