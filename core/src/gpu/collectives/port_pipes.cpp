// The PortChannels of GpuCollectives' pipes to unmapped peers (pairs whose
// transport does not map peer memory: ethernet and other host-only
// transports staged by the core, or ranks on other hosts): one
// PortChannelService per GpuCollectives, two channels per (unmapped peer,
// block) — data (put from the outbox + signal) and ack (signal only) — so
// each channel's inbound counter has one waiting owner thread.
#include <chrono>
#include <string>
#include <thread>

#include "gpu/collectives/collectives_impl.hpp"
#include "gpu/cuda_check.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

void GpuCollectives::Impl::setupPorts() {
  const uint64_t G = blocks;
  portTable.assign(static_cast<size_t>(nranks) * G * 2, gpucoll::PortPipe{});
  bool any = false;
  for (const auto& [peer, conn] : connections) any = any || !conn->mapsPeerMemory();
  if (any) service = std::make_unique<PortChannelService>(comm);
  PB_CUDA_CHECK(cudaMalloc(&portSeen, portTable.size() * sizeof(uint64_t)));
  PB_CUDA_CHECK(cudaMemset(portSeen, 0, portTable.size() * sizeof(uint64_t)));
  // Both sides of a pair add its channels in the same order (peers
  // ascending, then block, then kind): addChannel pairs them by that order.
  for (const auto& [peer, conn] : connections) {
    if (conn->mapsPeerMemory()) continue;
    for (uint64_t b = 0; b < G; ++b)
      for (uint32_t kind : {gpucoll::kData, gpucoll::kAck}) {
        const PortChannelDeviceHandle h = service->addChannel(conn, portLocal, portRemotes[peer]).deviceHandle();
        const uint64_t i = (peer * G + b) * 2 + kind;
        portTable[i] = gpucoll::PortPipe{h.semaphore.inbound, h.semaphore.expected, portSeen + i, h.channel};
        ctx.fifo = h.fifo;
        ctx.portAbort = h.semaphore.abortFlag;
      }
  }
  PB_CUDA_CHECK(cudaMalloc(&ports, portTable.size() * sizeof(gpucoll::PortPipe)));
  PB_CUDA_CHECK(cudaMemcpy(ports, portTable.data(), portTable.size() * sizeof(gpucoll::PortPipe), cudaMemcpyHostToDevice));
}

namespace {

/// Reads one word of device or mapped host memory; false when it cannot be read.
bool readDevice(const uint64_t* p, uint64_t& out) {
  if (cudaMemcpy(&out, p, sizeof(out), cudaMemcpyDefault) == cudaSuccess) return true;
  cudaGetLastError();
  return false;
}

}  // namespace

void GpuCollectives::Impl::drainPorts() noexcept {
  // Called once our kernels ended. (1) The proxy handles everything they
  // pushed. (2) The receiver of our messages acks them in batches of
  // ackBatch, so the acks of all but sent % ackBatch of them must have
  // landed in our ack channels' counters: after that,
  // and after every peer did the same (the destructor's barrier), no proxy
  // signals a counter that the service is about to free.
  const auto timeout = comm.defaultTimeout();
  if (!service->waitIdle(timeout)) {
    PB_LOG(Warn, "GPUCOLL", "rank " << rank << ": the PortChannel proxy did not finish the collectives' requests");
    return;
  }
  if (__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) != 0) return;  // a wait failed: the counts do not balance
  const uint64_t n = nranks, G = blocks;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (uint64_t p = 0; p < n; ++p)
    for (uint64_t b = 0; b < G; ++b) {
      const gpucoll::PortPipe& ack = portTable[(p * G + b) * 2 + gpucoll::kAck];
      if (!ack.inbound) continue;
      uint64_t sent = 0, acked = 0;
      if (!readDevice(state + 2 * n * G + p * G + b, sent)) return;
      sent -= sent % ctx.layout.ackBatch;
      while (readDevice(ack.inbound, acked) && acked < sent) {
        if (std::chrono::steady_clock::now() > deadline) {
          PB_LOG(Warn, "GPUCOLL", "rank " << rank << ": " << (sent - acked) << " acks from rank " << p
                                          << " did not arrive before destruction");
          return;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
}

}  // namespace plugboard
