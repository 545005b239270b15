// PortChannels: kernels ask the host proxy (through the Fifo) to put and
// signal over cudaipc; the peer's kernel waits and checks the data.
#include <gtest/gtest.h>

#include "comm_fixture.hpp"
#include "gpu_test_util.hpp"
#include "multiproc.hpp"
#include "plugboard/gpu/port_channel.hpp"
#include "port_ping_pong.cuh"

using namespace plugboard;
using namespace plugboard::test;

TEST(GpuPortChannel, TriggerEncodingRoundTrips) {
  ProxyTrigger t = makePortTrigger(kPortPut | kPortSignal, 513, 0xfedcba98, 0x12345678, 0x7fffffff);
  PortTriggerFields f = decodePortTrigger(t);
  EXPECT_EQ(f.request, uint64_t(kPortPut | kPortSignal));
  EXPECT_EQ(f.channel, 513u);
  EXPECT_EQ(f.dstOffset, 0xfedcba98u);
  EXPECT_EQ(f.srcOffset, 0x12345678u);
  EXPECT_EQ(f.size, 0x7fffffffu);
  EXPECT_EQ(t.snd & kTriggerValidBit, 0u) << "encoding must leave the valid bit to push()";
}

TEST(GpuPortChannel, PutSignalFlushThroughTheProxyOverCudaIpc) {
  PB_REQUIRE_GPU_NO_INIT();
  auto results = runRanks(2, std::chrono::seconds(120), [](int rank, int n, const UniqueId& id) {
    int devices = 0;
    cudaGetDeviceCount(&devices);
    if (cudaSetDevice(rank % devices) != cudaSuccess) throw std::runtime_error("cudaSetDevice failed");
    setenv("PLUGBOARD_TRANSPORTS", "cudaipc,ethernet", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    auto conn = comm.connectAll(MemoryKind::Cuda).at(1 - rank);
    if (conn->transport() != "cudaipc") throw std::runtime_error("expected cudaipc, got " + conn->transport());
    pingPongOverPortChannel(comm, conn, {1, 4099, kHalf});
  });
  expectAllPassed(results);
}
