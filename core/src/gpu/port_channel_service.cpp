#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "communicator/communicator_impl.hpp"
#include "gpu/cuda_check.hpp"
#include "numa.hpp"
#include "plugboard/gpu/fifo.hpp"
#include "plugboard/gpu/port_channel.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// What the proxy needs for one channel's requests.
struct ChannelEntry {
  std::shared_ptr<Connection> connection;
  RegisteredMemory local;
  RemoteMemory remote;
  RemoteMemory peerInbound;   // the peer's counter this side signals
  RegisteredMemory inboundMem;
  uint64_t* counters = nullptr;  // device: [0] inbound (mapped pairs), [1] expected
  uint64_t* hostInbound = nullptr;  // pinned, mapped: the inbound counter of an unmapped pair
};

}  // namespace

struct PortChannelService::Impl {
  Communicator& comm;
  int device = 0;
  Fifo fifo;
  uint32_t* flags = nullptr;  // mapped host: [0] abort, [1] error (for the channels' waits)
  uint32_t* flagsDev = nullptr;
  std::mutex mutex;                                   // guards channels and error
  std::vector<std::unique_ptr<ChannelEntry>> channels;  // by channel id; entries never move
  std::vector<Connection*> received;  // the channels' distinct connections that need receiving (guarded by mutex)
  std::exception_ptr error;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> handled{0};
  // The request in hand, for describeState(): its fst/snd words and when it began (0: none).
  std::atomic<uint64_t> currentFst{0}, currentSnd{0};
  std::atomic<int64_t> currentSinceNs{0};
  std::atomic<int64_t> busyNs{0};  // total time in handle()
  uint64_t abortHook = 0;          // Communicator::Impl::addAbortHook id
  std::thread thread;

  Impl(Communicator& c, uint32_t fifoSize) : comm(c), fifo(fifoSize) {}
  void run();
  void handle(const ProxyTrigger& t);
  void receiveAll();
};

namespace {

/// How long after its last request the proxy also receives for its
/// connections while it polls the Fifo. Past it the proxy only yields, and
/// the transports' own receiver threads take over.
constexpr int64_t kReceivingWindowNs = 5'000'000;

}  // namespace

void PortChannelService::Impl::receiveAll() {
  // A peer's writes and signals reach this rank's memory without a thread
  // hand-off while the proxy is busy anyway (NCCL's proxy polls its sockets
  // the same way). A failed connection throws: the proxy stops on it.
  std::lock_guard<std::mutex> lock(mutex);
  for (Connection* c : received) c->progress();
}

void PortChannelService::Impl::handle(const ProxyTrigger& t) {
  PortTriggerFields f = decodePortTrigger(t);
  ChannelEntry* ch = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (f.channel >= channels.size())
      throw Error(ErrorCode::Internal, "port channel request for unknown channel " + std::to_string(f.channel));
    ch = channels[f.channel].get();
  }
  Connection& c = *ch->connection;
  if ((f.request & kPortPut) && (f.request & kPortSignal))
    c.writeWithSignal(ch->remote, f.dstOffset, ch->local, f.srcOffset, f.size, ch->peerInbound, 0, 1);
  else if (f.request & kPortPut)
    c.write(ch->remote, f.dstOffset, ch->local, f.srcOffset, f.size);
  else if (f.request & kPortSignal)
    c.signal(ch->peerInbound, 0, f.size ? f.size : 1);
  if (f.request & kPortFlush) c.flush();
}

namespace {

/// Binds the proxy thread near the GPU when the setting allows; logs where.
void bindProxyNearDevice(const Config& config, int device) {
  if (!config.getBool("proxy_numa_bind")) return;
  char busId[32] = {};
  if (cudaDeviceGetPCIBusId(busId, sizeof(busId), device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  PB_LOG(Info, "PROXY", "proxy thread of GPU " << device << " (" << busId << "): "
                                                << bindThisThreadToNumaNode(numaNodeOfPciDevice(busId)));
}

}  // namespace

void PortChannelService::Impl::run() {
  try {
    PB_CUDA_CHECK(cudaSetDevice(device));
    bindProxyNearDevice(comm.config(), device);
    int64_t lastRequestNs = steadyNowNs();
    while (!stopping.load(std::memory_order_relaxed)) {
      bool ready = false;
      ProxyTrigger t = fifo.poll(&ready);
      if (!ready) {
        if (steadyNowNs() - lastRequestNs < kReceivingWindowNs) receiveAll();
        else std::this_thread::yield();
        continue;
      }
      currentFst.store(t.fst, std::memory_order_relaxed);
      currentSnd.store(t.snd, std::memory_order_relaxed);
      currentSinceNs.store(steadyNowNs(), std::memory_order_release);
      const int64_t began = currentSinceNs.load(std::memory_order_relaxed);
      handle(t);
      lastRequestNs = steadyNowNs();
      busyNs.fetch_add(lastRequestNs - began, std::memory_order_relaxed);
      currentSinceNs.store(0, std::memory_order_release);
      fifo.pop();  // after the request completed: a device sync() then means "done"
      handled.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      error = std::current_exception();
    }
    fifo.abort();  // kernels waiting on the queue end with a reported error
    __atomic_store_n(&flags[0], 1u, __ATOMIC_RELEASE);
  }
}

PortChannelService::PortChannelService(Communicator& comm, uint32_t fifoSize)
    : impl_(std::make_unique<Impl>(comm, fifoSize)) {
  PB_CUDA_CHECK(cudaGetDevice(&impl_->device));
  PB_CUDA_CHECK(cudaHostAlloc(&impl_->flags, 2 * sizeof(uint32_t), cudaHostAllocMapped));
  impl_->flags[0] = impl_->flags[1] = 0;
  PB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&impl_->flagsDev), impl_->flags, 0));
  impl_->thread = std::thread([m = impl_.get()] { m->run(); });
  impl_->abortHook = comm.impl_->addAbortHook([this] { abort(); });
}

PortChannelService::~PortChannelService() {
  impl_->comm.impl_->removeAbortHook(impl_->abortHook);
  impl_->stopping = true;
  if (impl_->thread.joinable()) impl_->thread.join();
  PB_LOG(Info, "PROXY", "PortChannel proxy of rank " << impl_->comm.rank() << " stopped: " << describeState());
  for (auto& ch : impl_->channels) {
    ch->peerInbound = RemoteMemory();
    ch->inboundMem = RegisteredMemory();
    if (ch->counters) cudaFree(ch->counters);
    if (ch->hostInbound) cudaFreeHost(ch->hostInbound);
  }
  if (impl_->flags) cudaFreeHost(impl_->flags);
}

PortChannel PortChannelService::addChannel(std::shared_ptr<Connection> connection, RegisteredMemory local,
                                           RemoteMemory remote) {
  Impl& m = *impl_;
  if (!connection || !local || !remote) throw Error(ErrorCode::InvalidUsage, "addChannel needs a connection and two memories");
  auto e = std::make_unique<ChannelEntry>();
  e->connection = connection;
  e->local = std::move(local);
  e->remote = std::move(remote);
  PB_CUDA_CHECK(cudaMalloc(&e->counters, 2 * sizeof(uint64_t)));
  PB_CUDA_CHECK(cudaMemset(e->counters, 0, 2 * sizeof(uint64_t)));
  uint64_t* inbound = e->counters;
  if (connection->mapsPeerMemory()) {
    e->inboundMem = m.comm.registerMemory(e->counters, sizeof(uint64_t), MemoryKind::Cuda);
  } else {
    // Over a network transport the peer's signals land in host memory by
    // the transport's own hand: no CUDA stream work (which can queue behind
    // the very kernel that waits for the signal) stands between them.
    PB_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&e->hostInbound), sizeof(uint64_t), cudaHostAllocMapped));
    *e->hostInbound = 0;
    PB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&inbound), e->hostInbound, 0));
    e->inboundMem = m.comm.registerMemory(e->hostInbound, sizeof(uint64_t), MemoryKind::Host);
  }
  const int peer = connection->remoteRank();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    const bool known = std::find(m.received.begin(), m.received.end(), connection.get()) != m.received.end();
    if (!connection->mapsPeerMemory() && !known) m.received.push_back(connection.get());
  }
  m.comm.impl_->sendMemoryTagged(e->inboundMem, peer, kTagSemaphore);
  e->peerInbound = m.comm.impl_->recvMemoryTagged(peer, kTagSemaphore);
  PortChannel ch;
  std::lock_guard<std::mutex> lock(m.mutex);
  ch.handle_.fifo = m.fifo.deviceHandle();
  ch.handle_.semaphore = Device2DeviceSemaphoreDeviceHandle{inbound, nullptr, e->counters + 1, m.flagsDev, m.flagsDev + 1};
  ch.handle_.channel = static_cast<uint32_t>(m.channels.size());
  m.channels.push_back(std::move(e));
  return ch;
}

void PortChannelService::checkErrors() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->error) std::rethrow_exception(impl_->error);
}

void PortChannelService::abort() {
  impl_->fifo.abort();
  __atomic_store_n(&impl_->flags[0], 1u, __ATOMIC_RELEASE);
}

uint64_t PortChannelService::handled() const { return impl_->handled.load(); }

std::string PortChannelService::describeState() const {
  Impl& m = *impl_;
  char busy[32];
  std::snprintf(busy, sizeof(busy), "%.1f ms", double(m.busyNs.load()) / 1e6);
  std::string text = "proxy: handled " + std::to_string(m.handled.load()) + " requests in " + busy + ", " +
                     std::to_string(m.fifo.pending()) + " queued";
  const int64_t since = m.currentSinceNs.load(std::memory_order_acquire);
  if (since == 0) return text + ", none in hand";
  const PortTriggerFields f = decodePortTrigger(ProxyTrigger{m.currentFst.load(), m.currentSnd.load()});
  std::string what = (f.request & kPortPut) ? "put of " + std::to_string(f.size) + " bytes" : std::string("signal");
  if ((f.request & kPortPut) && (f.request & kPortSignal)) what += " + signal";
  int peer = -1;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (f.channel < m.channels.size()) peer = m.channels[f.channel]->connection->remoteRank();
  }
  const double ms = double(steadyNowNs() - since) / 1e6;
  char took[32];
  std::snprintf(took, sizeof(took), "%.1f ms", ms);
  return text + ", in hand for " + took + ": " + what + " on channel " + std::to_string(f.channel) + " to rank " +
         std::to_string(peer);
}

bool PortChannelService::waitIdle(std::chrono::milliseconds timeout) const {
  Impl& m = *impl_;
  // Positions are taken by atomicAdd on the device head, and the proxy pops
  // in position order and counts every pop: idle once handled reaches head.
  unsigned long long head = 0;
  if (cudaMemcpy(&head, m.fifo.deviceHandle().head, sizeof(head), cudaMemcpyDeviceToHost) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (m.handled.load() < head) {
    {
      std::lock_guard<std::mutex> lock(m.mutex);
      if (m.error) return false;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

}  // namespace plugboard
