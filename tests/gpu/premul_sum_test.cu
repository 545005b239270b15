// GpuCollectives' PreMulSum calls (allreduce, reducescatter, reduce with a
// PreMulScalar) on every path: the LL kernels and the one-shot and two-shot
// pipelines scaling as they read, the host relay (over ethernet) through a
// scaled copy. Every rank has its
// own scalar, so a kernel that scaled a peer's data by its own (or twice, or
// not at all) gives a wrong sum; inputs and scalars keep every value exact.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_coll_check.hpp"
#include "gpu_test_util.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

float inputOf(int rank, size_t i) { return static_cast<float>(i % 13) + static_cast<float>(rank); }
float scalarOf(int rank) { return 0.5f * static_cast<float>(rank + 1); }

template <typename T>
PreMulScalar hostScalar(T v) {
  PreMulScalar s;
  std::memcpy(s.hostValue.data(), &v, sizeof(T));
  return s;
}

template <typename T>
std::vector<T> download(const DevBuf& b, size_t count) {
  const std::vector<char> raw = b.download(0, count * sizeof(T));
  std::vector<T> v(count);
  std::memcpy(v.data(), raw.data(), raw.size());
  return v;
}

template <typename T>
void upload(const DevBuf& b, const std::vector<T>& v) {
  std::vector<char> raw(v.size() * sizeof(T));
  std::memcpy(raw.data(), v.data(), raw.size());
  b.upload(raw);
}

void expectFloats(const std::vector<float>& got, size_t offset, int n, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += scalarOf(r) * inputOf(r, offset + i);
    if (got[i] != want)
      throw std::runtime_error(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", want " +
                               std::to_string(want));
  }
}

void floatCalls(GpuCollectives& g, int rank, int n, cudaStream_t s, size_t count) {
  const std::string tag = "rank " + std::to_string(rank) + ", " + std::to_string(count) + " floats: ";
  std::vector<float> mine(count), all(count * n);
  for (size_t i = 0; i < count; ++i) mine[i] = inputOf(rank, i);
  for (size_t i = 0; i < all.size(); ++i) all[i] = inputOf(rank, i);
  DevBuf in(count * 4), out(count * 4), big(count * n * 4), onDevice(4);
  upload(in, mine);
  upload(onDevice, std::vector<float>{scalarOf(rank)});
  PreMulScalar dev;
  dev.device = onDevice.p;

  g.allReduce(in.p, out.p, count, DataType::Float32, hostScalar(scalarOf(rank)), s);
  g.synchronize(s);
  expectFloats(download<float>(out, count), 0, n, tag + "allreduce");
  if (download<float>(in, count) != mine) throw std::runtime_error(tag + "the allreduce changed its input");
  g.allReduce(in.p, in.p, count, DataType::Float32, dev, s);
  g.synchronize(s);
  expectFloats(download<float>(in, count), 0, n, tag + "allreduce in place, device scalar");

  upload(big, all);
  g.reduceScatter(big.p, out.p, count, DataType::Float32, dev, s);
  g.synchronize(s);
  expectFloats(download<float>(out, count), rank * count, n, tag + "reducescatter");

  upload(in, mine);
  out.poison();
  g.reduce(in.p, out.p, count, DataType::Float32, hostScalar(scalarOf(rank)), n - 1, s);
  g.synchronize(s);
  if (rank == n - 1) expectFloats(download<float>(out, count), 0, n, tag + "reduce to rank " + std::to_string(n - 1));
}

/// Integers multiply in their own width and wrap.
void intCalls(GpuCollectives& g, int rank, int n, cudaStream_t s, size_t count) {
  std::vector<int32_t> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = static_cast<int32_t>(i % 7) - 3 + rank + (i % 5 == 0 ? 0x40000000 : 0);
  DevBuf buf(count * 4);
  upload(buf, mine);
  g.allReduce(buf.p, buf.p, count, DataType::Int32, hostScalar<int32_t>(rank + 2), s);
  g.synchronize(s);
  const std::vector<int32_t> got = download<int32_t>(buf, count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t want = 0;
    for (int r = 0; r < n; ++r)
      want += static_cast<uint32_t>(r + 2) *
              static_cast<uint32_t>(static_cast<int32_t>(i % 7) - 3 + r + (i % 5 == 0 ? 0x40000000 : 0));
    if (got[i] != static_cast<int32_t>(want))
      throw std::runtime_error("rank " + std::to_string(rank) + ", " + std::to_string(count) + " int32: element " +
                               std::to_string(i) + " is " + std::to_string(got[i]) + ", want " +
                               std::to_string(static_cast<int32_t>(want)));
  }
}

}  // namespace

TEST(GpuPreMulSum, EachRankScalesItsOwnInputOnEveryPath) {
  PB_REQUIRE_GPU_NO_INIT();
  for (int n : {2, 3})
    runGpuRanks(n, kSmall, [](GpuCollectives& g, int rank, int nranks, cudaStream_t s) {
      for (size_t count : {size_t(7), size_t(3000), size_t(100003)}) {
        floatCalls(g, rank, nranks, s, count);
        intCalls(g, rank, nranks, s, count);
      }
    });
}

TEST(GpuPreMulSum, RelayedAndPortPipelinedCallsScaleEachRanksOwnInput) {
  PB_REQUIRE_GPU_NO_INIT();
  // Over ethernet (no pair mapped): up to 8 KiB a call goes through the host
  // relay, 100003 floats through the PortChannel pipeline.
  Settings relay = {{"gpu_scratch_bytes", "65536"}, {"gpu_blocks", "2"}, {"gpu_threads", "256"},
                    {"gpu_chunk_bytes", "8192"}, {"gpu_host_relay_bytes", "8192"}};
  runGpuRanks(2, relay, [](GpuCollectives& g, int rank, int nranks, cudaStream_t s) {
    for (size_t count : {size_t(7), size_t(1009), size_t(100003)}) {
      floatCalls(g, rank, nranks, s, count);
      intCalls(g, rank, nranks, s, count);
    }
  }, std::chrono::seconds(110), [](int, Settings&) { setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1); });
}

TEST(GpuPreMulSum, EightBitFloatsAreRefusedBeforeAnythingIsEnqueued) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, kSmall, [](GpuCollectives& g, int, int, cudaStream_t s) {
    DevBuf buf(64);
    requireError([&] { g.allReduce(buf.p, buf.p, 64, DataType::Float8E4M3, PreMulScalar{}, s); },
                 ErrorCode::InvalidUsage, {"allreduce", "no 8-bit float type"});
    requireError([&] { g.reduceScatter(buf.p, buf.p, 32, DataType::Float8E5M2, PreMulScalar{}, s); },
                 ErrorCode::InvalidUsage, {"reducescatter", "no 8-bit float type"});
    requireError([&] { preMulScale(buf.p, buf.p, 64, DataType::Float8E4M3, PreMulScalar{}, s); },
                 ErrorCode::InvalidUsage, {"no 8-bit float type"});
    g.synchronize(s);
  });
}
