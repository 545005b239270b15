// One-way latency of the network path, two ranks over ethernet (loopback),
// in one run: a GPU thread's signal through the PortChannel proxy to the
// peer's GPU thread (signal only, and an 8-byte put with its signal, as a
// small collective sends), beside the host's Host2HostSemaphore over the
// same connection. Each is a ping-pong of `iters` round trips; one-way is
// half a round trip. On a one-GPU machine both ranks share GPU 0: run it
// under CUDA MPS (tests/gpu/mps.sh), or the kernels time-slice.
//   plugboard-bench-net-latency [iters]
// Rank 0 prints "name value" lines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "plugboard/communicator.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/device_wait.hpp"
#include "plugboard/gpu/port_channel.hpp"
#include "two_ranks.hpp"

using namespace plugboard;

namespace {

/// Rank 0 starts each round trip, rank 1 answers; put > 0: each message is
/// a put of that many bytes with its signal, else a bare signal.
__global__ void portPingPong(PortChannelDeviceHandle ch, int rank, int iters, uint32_t put, uint64_t* ns,
                             unsigned* failed) {
  auto send = [&] { return put ? ch.putWithSignal(0, 0, put) : ch.signal(); };
  const uint64_t start = globalTimerNs();
  for (int i = 0; i < iters; ++i) {
    const bool ok = rank == 0 ? send() && ch.wait() : ch.wait() && send();
    if (!ok) {
      *failed = 1;
      return;
    }
  }
  *ns = globalTimerNs() - start;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(ErrorCode::System, std::string(what) + ": " + cudaGetErrorString(e));
}

/// Microseconds one way, from a GPU ping-pong over port.
double gpuOneWayUs(PortChannel& port, int rank, int iters, uint32_t put, uint64_t* ns, unsigned* failed) {
  portPingPong<<<1, 1>>>(port.deviceHandle(), rank, iters, put, ns, failed);
  check(cudaDeviceSynchronize(), "ping-pong kernel");
  uint64_t t = 0;
  unsigned f = 0;
  check(cudaMemcpy(&t, ns, 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaMemcpy(&f, failed, 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (f) throw Error(ErrorCode::Timeout, "rank " + std::to_string(rank) + ": the GPU ping-pong timed out");
  return t / 1000.0 / iters / 2;
}

/// Microseconds one way, from a host semaphore ping-pong.
double hostOneWayUs(Host2HostSemaphore& sem, int rank, int iters) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (rank == 0) {
      sem.signal();
      sem.wait();
    } else {
      sem.wait();
      sem.signal();
    }
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / iters / 2;
}

int rankMain(int rank, const UniqueId& id, int iters) {
  int devices = 0;
  check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  check(cudaSetDevice(rank % devices), "cudaSetDevice");
  setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1);
  auto boot = std::make_shared<TcpBootstrap>(rank, 2, id, std::chrono::seconds(60), "lo");
  Communicator comm(boot);
  const int peer = 1 - rank;
  auto conn = comm.connectAll().at(peer);
  uint64_t* ns;
  unsigned* failed;
  check(cudaMalloc(&ns, 8), "cudaMalloc");
  check(cudaMalloc(&failed, 4), "cudaMalloc");
  check(cudaMemset(failed, 0, 4), "cudaMemset");
  std::vector<char> buf(4096);
  RegisteredMemory local = comm.registerMemory(buf.data(), buf.size());
  comm.sendMemory(local, peer);
  RemoteMemory remote = comm.recvMemory(peer);
  Host2HostSemaphore sem(comm, conn);
  double host = 0, gpuSignal = 0, gpuPut = 0;
  {
    PortChannelService service(comm);
    PortChannel port = service.addChannel(conn, local, remote);
    boot->barrier();
    gpuOneWayUs(port, rank, 100, 0, ns, failed);  // warm-up
    boot->barrier();
    gpuSignal = gpuOneWayUs(port, rank, iters, 0, ns, failed);
    boot->barrier();
    gpuPut = gpuOneWayUs(port, rank, iters, 8, ns, failed);
    boot->barrier();
    service.checkErrors();
  }
  hostOneWayUs(sem, rank, 100);  // warm-up
  boot->barrier();
  host = hostOneWayUs(sem, rank, iters);
  boot->barrier();
  if (rank == 0) {
    cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    std::printf("# net_latency: %s, 2 ranks over ethernet (loopback), %d round trips each, one-way = half\n",
                prop.name, iters);
    std::printf("gpu_port_signal_oneway_us %.2f\ngpu_port_put8_signal_oneway_us %.2f\nhost_semaphore_oneway_us %.2f\n",
                gpuSignal, gpuPut, host);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2000;
  return bench::runTwoRanks([iters](int rank, const UniqueId& id) { return rankMain(rank, id, iters); });
}
