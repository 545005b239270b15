// launchInfoFromEnvironment: each launcher's variables, their precedence,
// and the errors for missing or malformed ones.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "plugboard/bootstrap.hpp"
#include "plugboard/error.hpp"

namespace plugboard {
namespace {

const char* const kVars[] = {
    "PLUGBOARD_RANK", "PLUGBOARD_NRANKS", "PLUGBOARD_LOCAL_RANK", "PLUGBOARD_BOOTSTRAP_ADDR",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_ID",
    "PLUGBOARD_JOB_ID", "TORCHELASTIC_RUN_ID"};

// Starts each test from an environment without any launcher variable and
// puts the original values back afterwards.
class LaunchInfoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      saved_[v] = old ? std::optional<std::string>(old) : std::nullopt;
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }
  static void set(const char* name, const char* value) { setenv(name, value, 1); }
  // The Config error's text, or a failure if none was thrown.
  static std::string configError() {
    try {
      LaunchInfo info = launchInfoFromEnvironment();
      ADD_FAILURE() << "no error; got rank " << info.rank << " root " << info.rootAddress;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Config) << e.what();
      return e.what();
    }
    return "";
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(LaunchInfoTest, TorchrunUsesMasterPortPlusOne) {
  set("RANK", "3");
  set("WORLD_SIZE", "8");
  set("LOCAL_RANK", "1");
  set("MASTER_ADDR", "10.1.2.3");
  set("MASTER_PORT", "29500");
  LaunchInfo info = launchInfoFromEnvironment();
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.nranks, 8);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.rootAddress, "10.1.2.3:29501");
  EXPECT_TRUE(contains(info.source, "torchrun")) << info.source;
}

TEST_F(LaunchInfoTest, TorchrunIPv6MasterAddrIsBracketed) {
  set("RANK", "0");
  set("WORLD_SIZE", "2");
  set("MASTER_ADDR", "fd00::5");
  set("MASTER_PORT", "1000");
  EXPECT_EQ(launchInfoFromEnvironment().rootAddress, "[fd00::5]:1001");
}

TEST_F(LaunchInfoTest, OpenMpiOnOneHostDerivesLoopbackPortFromJob) {
  set("OMPI_COMM_WORLD_RANK", "2");
  set("OMPI_COMM_WORLD_SIZE", "4");
  set("OMPI_COMM_WORLD_LOCAL_RANK", "2");
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
  set("OMPI_MCA_ess_base_jobid", "3735486465");
  LaunchInfo info = launchInfoFromEnvironment();
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.nranks, 4);
  EXPECT_EQ(info.localRank, 2);
  EXPECT_TRUE(contains(info.source, "Open MPI")) << info.source;
  ASSERT_EQ(info.rootAddress.rfind("127.0.0.1:", 0), 0u) << info.rootAddress;
  int port = std::stoi(info.rootAddress.substr(10));
  EXPECT_GE(port, 20000);
  EXPECT_LE(port, 29999);
  set("OMPI_COMM_WORLD_RANK", "0");  // another rank of the same job agrees
  EXPECT_EQ(launchInfoFromEnvironment().rootAddress, info.rootAddress);
  set("OMPI_MCA_ess_base_jobid", "3735486466");  // another job, another port
  EXPECT_NE(launchInfoFromEnvironment().rootAddress, info.rootAddress);
  unsetenv("OMPI_MCA_ess_base_jobid");
  set("PMIX_NAMESPACE", "prterun-host-1234@1");
  EXPECT_EQ(launchInfoFromEnvironment().rootAddress.rfind("127.0.0.1:", 0), 0u);
}

TEST_F(LaunchInfoTest, OpenMpiOnSeveralHostsNeedsAnAddress) {
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "4");
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  set("OMPI_MCA_ess_base_jobid", "77");
  std::string msg = configError();
  EXPECT_TRUE(contains(msg, "Open MPI")) << msg;
  EXPECT_TRUE(contains(msg, "PLUGBOARD_BOOTSTRAP_ADDR=host:port")) << msg;
  set("PLUGBOARD_BOOTSTRAP_ADDR", "node7:4242");
  EXPECT_EQ(launchInfoFromEnvironment().rootAddress, "node7:4242");
}

TEST_F(LaunchInfoTest, SlurmWithBootstrapAddr) {
  set("SLURM_PROCID", "5");
  set("SLURM_NTASKS", "16");
  set("SLURM_LOCALID", "1");
  set("PLUGBOARD_BOOTSTRAP_ADDR", "node1:1234");
  LaunchInfo info = launchInfoFromEnvironment();
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.nranks, 16);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.rootAddress, "node1:1234");
  EXPECT_TRUE(contains(info.source, "Slurm")) << info.source;
  unsetenv("PLUGBOARD_BOOTSTRAP_ADDR");
  std::string msg = configError();
  EXPECT_TRUE(contains(msg, "Slurm")) << msg;
  EXPECT_TRUE(contains(msg, "PLUGBOARD_BOOTSTRAP_ADDR")) << msg;
}

TEST_F(LaunchInfoTest, PlugboardVariablesWin) {
  set("PLUGBOARD_RANK", "1");
  set("PLUGBOARD_NRANKS", "2");
  set("PLUGBOARD_BOOTSTRAP_ADDR", "127.0.0.1:5000");
  set("RANK", "7");
  set("WORLD_SIZE", "9");
  set("MASTER_ADDR", "10.0.0.1");
  set("MASTER_PORT", "29500");
  set("SLURM_PROCID", "3");
  set("SLURM_NTASKS", "4");
  LaunchInfo info = launchInfoFromEnvironment();
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.nranks, 2);
  EXPECT_EQ(info.localRank, -1);
  EXPECT_EQ(info.rootAddress, "127.0.0.1:5000");
  EXPECT_TRUE(contains(info.source, "PLUGBOARD_RANK")) << info.source;
  unsetenv("PLUGBOARD_RANK");
  unsetenv("PLUGBOARD_NRANKS");
  info = launchInfoFromEnvironment();  // torchrun's next, and still the explicit address
  EXPECT_EQ(info.rank, 7);
  EXPECT_EQ(info.rootAddress, "127.0.0.1:5000");
}

TEST_F(LaunchInfoTest, SingleRankNeedsNoAddress) {
  set("PLUGBOARD_RANK", "0");
  set("PLUGBOARD_NRANKS", "1");
  EXPECT_EQ(launchInfoFromEnvironment().rootAddress, "127.0.0.1:0");
}

TEST_F(LaunchInfoTest, NoLauncherNamesTheVariables) {
  std::string msg = configError();
  EXPECT_TRUE(contains(msg, "PLUGBOARD_RANK")) << msg;
  EXPECT_TRUE(contains(msg, "torchrun")) << msg;
}

TEST_F(LaunchInfoTest, MissingSizeIsNamed) {
  set("RANK", "0");
  std::string msg = configError();
  EXPECT_TRUE(contains(msg, "WORLD_SIZE is missing")) << msg;
}

TEST_F(LaunchInfoTest, MalformedNumbersAreNamedWithTheirValue) {
  set("RANK", "1x");
  set("WORLD_SIZE", "4");
  std::string msg = configError();
  EXPECT_TRUE(contains(msg, "RANK='1x'")) << msg;
  set("RANK", "4");
  msg = configError();
  EXPECT_TRUE(contains(msg, "RANK=4")) << msg;
  EXPECT_TRUE(contains(msg, "WORLD_SIZE=4")) << msg;
  set("RANK", "1");
  set("MASTER_ADDR", "host");
  msg = configError();
  EXPECT_TRUE(contains(msg, "MASTER_PORT is missing")) << msg;
  set("MASTER_PORT", "70000");
  msg = configError();
  EXPECT_TRUE(contains(msg, "MASTER_PORT='70000'")) << msg;
}

TEST_F(LaunchInfoTest, JobKeyComesFromTheFirstJobIdentityAndEntersTheUniqueId) {
  set("PLUGBOARD_RANK", "0");
  set("PLUGBOARD_NRANKS", "2");
  set("PLUGBOARD_BOOTSTRAP_ADDR", "127.0.0.1:4000");
  EXPECT_EQ(launchInfoFromEnvironment().jobKey, "");
  set("OMPI_MCA_ess_base_jobid", "77");
  EXPECT_EQ(launchInfoFromEnvironment().jobKey, "OMPI_MCA_ess_base_jobid=77");
  set("PMIX_NAMESPACE", "prterun-n1-1234@1");
  EXPECT_EQ(launchInfoFromEnvironment().jobKey, "PMIX_NAMESPACE=prterun-n1-1234@1");
  set("SLURM_JOB_ID", "991");
  set("SLURM_STEP_ID", "2");
  EXPECT_EQ(launchInfoFromEnvironment().jobKey, "SLURM_JOB_ID=991.2");
  set("TORCHELASTIC_RUN_ID", "none");  // torchrun without --rdzv-id: not an identity
  EXPECT_EQ(launchInfoFromEnvironment().jobKey, "SLURM_JOB_ID=991.2");
  set("TORCHELASTIC_RUN_ID", "run-5");
  EXPECT_EQ(launchInfoFromEnvironment().jobKey, "TORCHELASTIC_RUN_ID=run-5");
  set("PLUGBOARD_JOB_ID", "mine");
  LaunchInfo info = launchInfoFromEnvironment();
  EXPECT_EQ(info.jobKey, "PLUGBOARD_JOB_ID=mine");
  EXPECT_TRUE(contains(info.source, "job PLUGBOARD_JOB_ID=mine")) << info.source;
  // Same address and key: the same id on every rank; another key: another job.
  EXPECT_EQ(TcpBootstrap::uniqueIdFromAddress(info.rootAddress, info.jobKey).bytes,
            TcpBootstrap::uniqueIdFromAddress("127.0.0.1:4000", "PLUGBOARD_JOB_ID=mine").bytes);
  EXPECT_NE(TcpBootstrap::uniqueIdFromAddress(info.rootAddress, info.jobKey).bytes,
            TcpBootstrap::uniqueIdFromAddress(info.rootAddress, "PLUGBOARD_JOB_ID=other").bytes);
  EXPECT_NE(TcpBootstrap::uniqueIdFromAddress(info.rootAddress).bytes,
            TcpBootstrap::uniqueIdFromAddress(info.rootAddress, info.jobKey).bytes);
}

}  // namespace
}  // namespace plugboard
