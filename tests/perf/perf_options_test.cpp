// plugboard-perf's GPU-mode flags: parsing, their error messages, and how
// --mem resolves against the build and the machine (no GPU needed).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collective_ops.hpp"
#include "mem_mode.hpp"
#include "options.hpp"
#include "plugboard/error.hpp"

namespace plugboard::perf {
namespace {

Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "plugboard-perf");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parseOptions(static_cast<int>(argv.size()), argv.data());
}

/// The InvalidUsage message parse() throws for args.
std::string parseError(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

std::string resolveError(const Options& o, bool withCuda, int devices) {
  try {
    resolveMemMode(o, withCuda, devices);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(PerfOptions, DefaultsAreAutoWithoutGraphOrComparison) {
  Options o = parse({});
  EXPECT_EQ(o.mem, MemMode::Auto);
  EXPECT_EQ(o.graphLaunches, 0);
  EXPECT_FALSE(o.compareNccl);
  EXPECT_TRUE(o.ncclLib.empty());
}

TEST(PerfOptions, ParsesGpuFlags) {
  Options o = parse({"--mem", "gpu", "-G", "3", "--compare", "nccl", "--nccl-lib", "/opt/nccl/libnccl.so.2"});
  EXPECT_EQ(o.mem, MemMode::Gpu);
  EXPECT_EQ(o.graphLaunches, 3);
  EXPECT_TRUE(o.compareNccl);
  EXPECT_EQ(o.ncclLib, "/opt/nccl/libnccl.so.2");
  EXPECT_EQ(parse({"--mem", "host"}).mem, MemMode::Host);
  EXPECT_EQ(parse({"--mem", "auto"}).mem, MemMode::Auto);
  EXPECT_EQ(parse({"--cudagraph", "2"}).graphLaunches, 2);
  EXPECT_TRUE(parse({"--find-nccl", "--nccl-lib", "/x/libnccl.so.2"}).findNccl);  // a flag without a value
}

TEST(PerfOptions, PreMulSumIsASumWithAScalarOnGpuBuffersOnly) {
  const Options o = parse({"-o", "premulsum", "--mem", "gpu"});
  EXPECT_TRUE(o.preMul);
  EXPECT_EQ(o.op, ReduceOp::Sum);
  EXPECT_FALSE(parse({"-o", "avg"}).preMul);
  EXPECT_NE(parseError({"-o", "premulsum", "--mem", "host"}).find("is a GPU op"), std::string::npos);
}

TEST(PerfOptions, BadMemValueListsChoices) {
  std::string e = parseError({"--mem", "device"});
  EXPECT_NE(e.find("--mem 'device'"), std::string::npos) << e;
  EXPECT_NE(e.find("gpu, host or auto"), std::string::npos) << e;
}

TEST(PerfOptions, CompareAcceptsOnlyNccl) {
  std::string e = parseError({"--compare", "rccl"});
  EXPECT_NE(e.find("--compare 'rccl'"), std::string::npos) << e;
  EXPECT_NE(e.find("'nccl'"), std::string::npos) << e;
}

TEST(PerfOptions, NegativeGraphLaunchesRejected) {
  std::string e = parseError({"-G", "-1"});
  EXPECT_NE(e.find("-G '-1'"), std::string::npos) << e;
  EXPECT_NE(e.find("out of range 0.."), std::string::npos) << e;
  EXPECT_NE(parseError({"-G", "x"}).find("not an integer"), std::string::npos);
}

TEST(PerfOptions, NcclSymmetricIsAFlagThatNeedsTheComparison) {
  EXPECT_FALSE(parse({"--compare", "nccl"}).ncclSymmetric);
  EXPECT_TRUE(parse({"--nccl-symmetric", "--compare", "nccl"}).ncclSymmetric);
  EXPECT_NE(parseError({"--nccl-symmetric"}).find("needs --compare nccl"), std::string::npos);
  EXPECT_NE(std::string(usageText()).find("--nccl-symmetric"), std::string::npos);
}

TEST(PerfOptions, EmptyNcclLibRejected) {
  EXPECT_NE(parseError({"--nccl-lib", ""}).find("--nccl-lib: empty path"), std::string::npos);
}

TEST(PerfOptions, UsageNamesTheNewFlags) {
  std::string u = usageText();
  for (const char* flag : {"--mem gpu|host|auto", "--compare nccl", "--nccl-lib PATH", "PLUGBOARD_NCCL_LIB", "-G N"})
    EXPECT_NE(u.find(flag), std::string::npos) << flag;
}

TEST(PerfMemMode, AutoPicksGpuOnlyWithCudaAndADevice) {
  Options o;
  EXPECT_EQ(resolveMemMode(o, true, 2), MemMode::Gpu);
  EXPECT_EQ(resolveMemMode(o, true, 0), MemMode::Host);
  EXPECT_EQ(resolveMemMode(o, false, 0), MemMode::Host);
  o.mem = MemMode::Host;
  EXPECT_EQ(resolveMemMode(o, true, 8), MemMode::Host);
}

TEST(PerfMemMode, GpuWithoutDeviceSaysNoCudaDevice) {
  Options o;
  o.mem = MemMode::Gpu;
  EXPECT_NE(resolveError(o, true, 0).find("no CUDA device"), std::string::npos);
  EXPECT_NE(resolveError(o, false, 0).find("built without CUDA"), std::string::npos);
}

TEST(PerfMemMode, GraphsAndNcclNeedGpuBuffers) {
  Options o;
  o.graphLaunches = 1;
  std::string e = resolveError(o, true, 0);
  EXPECT_NE(e.find("-G 1 needs GPU buffers"), std::string::npos) << e;
  EXPECT_NE(e.find("(no CUDA device)"), std::string::npos) << e;
  o.graphLaunches = 0;
  o.compareNccl = true;
  o.mem = MemMode::Host;
  EXPECT_NE(resolveError(o, true, 4).find("--compare nccl needs GPU buffers"), std::string::npos);
}

TEST(PerfMemMode, CountsNoDeviceHereWithoutFailing) {
  // CI has no GPU: the probe child must answer 0 rather than fail or hang.
  EXPECT_GE(cudaDeviceCountWithoutInit(), 0);
}

TEST(PerfCallPointers, InPlaceLayoutsFollowNccl) {
  std::vector<char> s(64), r(64);
  Shape shape;
  shape.callCount = 4;
  Call c{Collective::AllGather, DataType::Float32, ReduceOp::Sum, 0, 2, 4, shape, true, &s, &r};
  char* send = reinterpret_cast<char*>(0x1000);
  char* recv = reinterpret_cast<char*>(0x8000);
  EXPECT_EQ(callPointers(c, send, recv).send, recv + 2 * 4 * 4);
  EXPECT_EQ(callPointers(c, send, recv).result, recv);
  c.collective = Collective::ReduceScatter;
  EXPECT_EQ(callPointers(c, send, recv).send, send);
  EXPECT_EQ(callPointers(c, send, recv).result, send + 2 * 4 * 4);
  c.collective = Collective::AllReduce;
  EXPECT_EQ(callPointers(c, send, recv).result, send);
  c.inPlace = false;
  EXPECT_EQ(callPointers(c, send, recv).result, recv);
}

}  // namespace
}  // namespace plugboard::perf
