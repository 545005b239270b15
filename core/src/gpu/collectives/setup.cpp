// GpuCollectives set-up: settings, CUDA-memory connections to every peer,
// the scratch buffer (counters, LL areas, pipe slots) registered once and
// exchanged with every peer, the port area (pipes and outbox of unmapped
// peers, pinned host memory) exchanged with the unmapped ones, and the
// device context of the kernels. The PortChannels of unmapped peers:
// port_pipes.cpp.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "communicator/communicator_impl.hpp"
#include "gpu/collectives/algorithm.hpp"
#include "gpu/collectives/collectives_impl.hpp"
#include "gpu/collectives/kernels.hpp"
#include "gpu/cuda_check.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

uint64_t roundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

int64_t readInRange(const Config& c, const char* name, int64_t lo, int64_t hi) {
  const int64_t v = c.getInt(name);
  if (v < lo || v > hi)
    throw Error(ErrorCode::Config, std::string(name) + " must be between " + std::to_string(lo) + " and " +
                                       std::to_string(hi) + ", got " + std::to_string(v));
  return v;
}

}  // namespace

GpuCollSettings GpuCollSettings::read(const Config& c) {
  GpuCollSettings s;
  s.smallBytes = readInRange(c, "gpu_allreduce_small_bytes", 0, 16 << 20);
  s.broadcastSmallBytes = readInRange(c, "gpu_broadcast_small_bytes", 0, 16 << 20);
  s.blocksSmallBytes = readInRange(c, "gpu_blocks_small_bytes", 0, 16 << 20);
  s.p2pSmallBytes = readInRange(c, "gpu_p2p_small_bytes", 0, 16 << 20);
  s.relayBytes = readInRange(c, "gpu_host_relay_bytes", 0, 16 << 20);
  s.relayAll = s.relayBytes > 0 && c.getBool("failover");
  s.relayAreaBytes = s.relayAll ? std::max(s.relayBytes, gpucoll::kRelayPieceBytes) : s.relayBytes;
  s.oneShotBytes = readInRange(c, "gpu_allreduce_oneshot_bytes", 0, int64_t(1) << 34);
  s.blocks = static_cast<uint32_t>(readInRange(c, "gpu_blocks", 1, 128));
  s.portBlocks = static_cast<uint32_t>(readInRange(c, "gpu_port_blocks", 1, 128));
  s.portSlots = static_cast<uint32_t>(readInRange(c, "gpu_port_slots", 2, 1024));
  s.threads = static_cast<uint32_t>(readInRange(c, "gpu_threads", 64, gpucoll::kMaxBlockThreads));
  if (s.threads % 32) throw Error(ErrorCode::Config, "gpu_threads must be a multiple of 32, got " + std::to_string(s.threads));
  s.chunkBytes = readInRange(c, "gpu_chunk_bytes", 1024, int64_t(1) << 30);
  if (s.chunkBytes % 16)
    throw Error(ErrorCode::Config, "gpu_chunk_bytes must be a multiple of 16, got " + std::to_string(s.chunkBytes));
  s.scratchBytes = readInRange(c, "gpu_scratch_bytes", 4096, int64_t(1) << 34);
  if (s.scratchBytes / s.blocks / s.chunkBytes < 2)
    throw Error(ErrorCode::Config, "gpu_scratch_bytes (" + std::to_string(s.scratchBytes) +
                                       ") must hold 2 chunks of gpu_chunk_bytes (" + std::to_string(s.chunkBytes) +
                                       ") for each of gpu_blocks (" + std::to_string(s.blocks) + ") blocks: raise it to " +
                                       std::to_string(2 * s.chunkBytes * s.blocks) + " or lower the others");
  const double timeout = c.getDouble("gpu_wait_timeout");
  if (!(timeout >= 0.001 && timeout <= 86400))
    throw Error(ErrorCode::Config, "gpu_wait_timeout must be between 0.001 and 86400 seconds, got " + std::to_string(timeout));
  s.waitTimeoutNs = static_cast<int64_t>(timeout * 1e9);
  s.switchMode = c.getString("gpu_switch");
  if (s.switchMode != "auto" && s.switchMode != "multicast" && s.switchMode != "peers" && s.switchMode != "off")
    throw Error(ErrorCode::Config, "gpu_switch must be auto, multicast, peers or off, got \"" + s.switchMode + "\"");
  s.switchBytes = readInRange(c, "gpu_switch_bytes", 65536, int64_t(1) << 34);
  s.switchChunkBytes = readInRange(c, "gpu_switch_chunk_bytes", 0, int64_t(1) << 34);
  if (s.switchChunkBytes % 16)
    throw Error(ErrorCode::Config,
                "gpu_switch_chunk_bytes must be a multiple of 16, got " + std::to_string(s.switchChunkBytes));
  return s;
}

GpuCollectives::Impl::~Impl() {
  // Kernels still queued use the mappings and the Fifo: let them end (their
  // waits are bounded), then let the proxy finish what they pushed and the
  // peers' acks land in our channels' counters. Peers map this scratch: drop
  // our mappings of theirs, then wait until every rank has (collective)
  // before stopping the proxy and freeing the scratch. After an abort the
  // peers may be gone or stuck: no draining, no collective step.
  if (abortHook) comm.impl_->removeAbortHook(abortHook);
  const bool aborted = comm.aborted();
  if (scratch) cudaDeviceSynchronize();  // a peer's notice (the watcher) ends kernels waiting for a failed rank
  for (uint64_t id : noticeWatches) comm.impl_->noticeWatcher->unwatch(id);  // before this object goes
  plans.reset();          // collective, like the rest
  relay.reset();          // collective unless aborted
  switchChannel.reset();  // collective unless aborted, like the rest
  if (service && !aborted) drainPorts();
  remotes.clear();
  local = RegisteredMemory();
  portRemotes.clear();
  portLocal = RegisteredMemory();
  if (scratch && !aborted) {
    try {
      comm.bootstrap().barrier();
    } catch (...) {  // a peer died: its mappings died with it
    }
  }
  service.reset();  // joins the proxy thread, frees the channels' counters
  if (scratch) cudaFree(scratch);
  if (portArea) cudaFreeHost(portArea);
  if (state) cudaFree(state);
  if (remoteTable) cudaFree(remoteTable);
  if (ports) cudaFree(ports);
  if (portSeen) cudaFree(portSeen);
  if (flags) cudaFreeHost(flags);
}

void GpuCollectives::Impl::agreeOnPortPairs() {
  // Every rank must pick the same allreduce algorithm and scratch layout,
  // but a rank only knows its own pairs: gather the unmapped-peer counts.
  std::vector<uint32_t> unmapped(nranks, 0);
  for (const auto& [peer, conn] : connections)
    if (!conn->mapsPeerMemory()) ++unmapped[rank];
  if (nranks > 1) comm.bootstrap().allGather(unmapped.data(), sizeof(uint32_t));
  for (uint32_t u : unmapped) maxUnmappedPeers = u > maxUnmappedPeers ? u : maxUnmappedPeers;
  portPairs = maxUnmappedPeers > 0;
  // Over the proxy every chunk is a request (a network message): few blocks
  // with large chunks, not 128 small ones.
  blocks = portPairs ? std::min(settings.blocks, settings.portBlocks) : settings.blocks;
  // PortChannel triggers carry a 16-bit channel id; 2 channels per (peer, block).
  const uint64_t channels = 2ull * maxUnmappedPeers * blocks;
  if (channels > 0xffffu)
    throw Error(ErrorCode::Config, "rank " + std::to_string(rank) + ": GPU collectives need " + std::to_string(channels) +
                                       " PortChannels on one rank (2 per unmapped peer and block), more than 65535: "
                                       "lower gpu_port_blocks (" + std::to_string(blocks) + ")");
}

uint32_t GpuCollectives::Impl::loadKernels() const {
  const uint32_t threads = settings.threads;
  const size_t pipes = gpucoll::pipesSharedBytes(nranks);
  uint32_t perSM = UINT32_MAX;
  gpucoll::preloadLLKernels(threads, &perSM);
  gpucoll::preloadReduceKernels(threads, pipes, &perSM);
  gpucoll::preloadMoveKernels(threads, pipes, &perSM);
  gpucoll::preloadP2PLLKernel(threads, &perSM);
  gpucoll::preloadSwitchKernels(threads, &perSM);
  return perSM;
}

void GpuCollectives::Impl::capBlocksForSharedGpus(uint32_t perSM) {
  // Each rank's seat: its host and GPU, and how many blocks that GPU holds.
  struct Wire {
    char gpu[96];
    uint64_t resident;
  };
  int sms = 0;
  PB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  char bus[32] = {0};
  PB_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), device));
  std::vector<Wire> all(nranks);
  Wire& mine = all[rank];
  std::snprintf(mine.gpu, sizeof(mine.gpu), "%.60s/%s", comm.hostOf(rank).c_str(), bus);
  mine.resident = static_cast<uint64_t>(sms) * perSM;
  comm.bootstrap().allGather(all.data(), sizeof(Wire));
  std::vector<gpucoll::GpuSeat> seats;
  for (const Wire& w : all) seats.push_back({std::string(w.gpu, strnlen(w.gpu, sizeof(w.gpu))), w.resident});
  const uint32_t cap = gpucoll::sharedGpuBlockCap(seats);
  if (cap >= blocks) return;
  PB_LOG(Info, "COLL", "rank " << rank << ": GPU collectives launch " << cap << " blocks instead of " << blocks
                                << ": every block of the ranks sharing a GPU must be resident at once ("
                                << mine.resident << " blocks of " << settings.threads << " threads on " << bus << ")");
  blocks = cap;
}

void GpuCollectives::Impl::computeLayout() {
  using gpucoll::ScratchLayout;
  const GpuCollSettings& s = settings;
  const uint64_t n = nranks, G = blocks;
  ScratchLayout& L = ctx.layout;
  L.counters = 0;
  L.ll = roundUp(2 * n * G * sizeof(uint64_t), 256);
  // With an unmapped pair no call takes the LL kernel: no LL area, an outbox.
  const uint64_t llBytes = gpucoll::largestLLBytes(s, nranks);
  L.llHalf = portPairs ? 0 : roundUp((llBytes + 7) / 8 * 16, 256);
  L.p2p = L.ll + 2 * n * L.llHalf;
  L.p2pHalf = portPairs ? 0 : roundUp((s.p2pSmallBytes + 7) / 8 * 16, 256);
  L.p2pAcks = L.p2p + 2 * n * L.p2pHalf;
  L.pipes = roundUp(L.p2pAcks + n * sizeof(uint64_t), 256);
  L.slotBytes = s.chunkBytes;
  uint64_t slots = s.scratchBytes / G / s.chunkBytes;
  // The port area (pinned host memory) holds gpu_port_slots per block.
  if (portPairs) slots = std::min<uint64_t>(slots, s.portSlots);
  L.slots = static_cast<uint32_t>(slots);
  L.ackBatch = portPairs && slots >= 4 ? L.slots / 2 : 1;
  L.perBlock = slots * s.chunkBytes;
  L.perSource = L.perBlock * G;
  L.total = L.pipes + n * L.perSource;
  L.outbox = portPairs ? n * L.perSource : 0;
  L.portTotal = portPairs ? 2 * n * L.perSource : 0;
  // PortChannel triggers carry 32-bit offsets into the port area.
  if (L.portTotal > 0xffffffffull)
    throw Error(ErrorCode::Config, "rank " + std::to_string(rank) + ": GPU collectives port area of " +
                                       std::to_string(L.portTotal) + " bytes (" + std::to_string(nranks) +
                                       " ranks, pipes and outbox for PortChannel pairs) exceeds the 4 GiB - 1 that "
                                       "PortChannel offsets can address: lower gpu_scratch_bytes (" +
                                       std::to_string(s.scratchBytes) + ")");
}

void GpuCollectives::Impl::exchangeScratch() {
  local = comm.registerMemory(scratch, ctx.layout.total, MemoryKind::Cuda);
  for (int p = 0; p < nranks; ++p)
    if (p != rank) comm.impl_->sendMemoryTagged(local, p, kTagGpuCollectives);
  remotes.resize(nranks);
  std::vector<char*> table(nranks, nullptr);
  for (int p = 0; p < nranks; ++p) {
    if (p == rank) continue;
    remotes[p] = comm.impl_->recvMemoryTagged(p, kTagGpuCollectives);
    if (remotes[p].size() < ctx.layout.total)
      throw Error(ErrorCode::Remote, "rank " + std::to_string(rank) + ": GPU collectives scratch of rank " +
                                         std::to_string(p) + " is smaller than ours (settings differ between ranks?)");
    // Unmapped peers keep a null entry: the kernels' "use the PortChannels" mark.
    const auto& conn = connections.at(p);
    if (conn->mapsPeerMemory()) table[p] = static_cast<char*>(conn->remotePointer(remotes[p]));
  }
  PB_CUDA_CHECK(cudaMemcpy(remoteTable, table.data(), nranks * sizeof(char*), cudaMemcpyHostToDevice));
}

void GpuCollectives::Impl::exchangePortAreas() {
  std::vector<int> unmapped;
  for (const auto& [peer, conn] : connections)
    if (!conn->mapsPeerMemory()) unmapped.push_back(peer);
  if (unmapped.empty()) return;
  const uint64_t bytes = ctx.layout.portTotal;
  PB_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&portArea), bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(portArea, 0, bytes);
  PB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&portAreaDev), portArea, 0));
  portLocal = comm.registerMemory(portArea, bytes, MemoryKind::Host);
  for (int p : unmapped) comm.impl_->sendMemoryTagged(portLocal, p, kTagGpuCollectivesPort);
  portRemotes.resize(nranks);
  for (int p : unmapped) {
    portRemotes[p] = comm.impl_->recvMemoryTagged(p, kTagGpuCollectivesPort);
    if (portRemotes[p].size() < bytes)
      throw Error(ErrorCode::Remote, "rank " + std::to_string(rank) + ": GPU collectives port area of rank " +
                                         std::to_string(p) + " is smaller than ours (settings differ between ranks?)");
  }
}

void GpuCollectives::Impl::setup() {
  rank = comm.rank();
  nranks = comm.size();
  settings = GpuCollSettings::read(comm.config());
  PB_CUDA_CHECK(cudaGetDevice(&device));
  if (nranks > 1) connections = comm.connectAll(MemoryKind::Cuda);
  const uint32_t perSM = loadKernels();
  agreeOnPortPairs();
  if (nranks > 1) capBlocksForSharedGpus(perSM);
  computeLayout();
  const uint64_t words = gpucoll::stateWords(nranks, blocks);
  PB_CUDA_CHECK(cudaMalloc(&scratch, ctx.layout.total));
  PB_CUDA_CHECK(cudaMemset(scratch, 0, ctx.layout.total));
  PB_CUDA_CHECK(cudaMalloc(&state, words * sizeof(uint64_t)));
  PB_CUDA_CHECK(cudaMemset(state, 0, words * sizeof(uint64_t)));
  PB_CUDA_CHECK(cudaMalloc(&remoteTable, nranks * sizeof(char*)));
  PB_CUDA_CHECK(cudaMemset(remoteTable, 0, nranks * sizeof(char*)));
  PB_CUDA_CHECK(cudaHostAlloc(&flags, (2 + nranks) * sizeof(uint32_t), cudaHostAllocMapped));
  for (int i = 0; i < 2 + nranks; ++i) flags[i] = 0;
  PB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flagsDev), flags, 0));
  PB_CUDA_CHECK(cudaDeviceSynchronize());  // memsets done before any peer can signal into the scratch
  if (nranks > 1) exchangeScratch();
  if (portPairs) exchangePortAreas();
  if (portPairs) setupPorts();  // after the exchanges: channels target the peers' port areas
  if (portPairs && settings.relayBytes > 0) {  // agreed: every rank or none
    gpucoll::preloadRelayKernel(settings.threads);
    relay = std::make_unique<gpucoll::HostRelay>(comm, settings.relayAreaBytes);
    if (settings.relayAll && rank == 0)  // once a job: a deliberate setting, but it costs
      PB_LOG(Warn, "GPUCOLL", "failover is on and a pair goes through the proxy: every GPU call runs through the "
                              "host relay so that it can fail over (large calls take about twice the pipelined "
                              "path's time; docs/design.md, \"Failover of GPU calls\")");
  } else if (portPairs && comm.config().getBool("failover")) {
    PB_LOG(Warn, "GPUCOLL", "rank " << rank << ": failover is on but gpu_host_relay_bytes is 0: GPU calls through "
                                        "the proxy do not fail over (they end with the connection's error)");
  }
  ctx.local = scratch;
  ctx.port = portAreaDev;
  ctx.remote = remoteTable;
  ctx.state = state;
  ctx.abortFlag = flagsDev;
  ctx.first = flagsDev + 1;
  ctx.errors = flagsDev + 2;
  ctx.waitTimeoutNs = settings.waitTimeoutNs;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.blocks = static_cast<int>(blocks);
  ctx.ports = ports;
  if (nranks > 1) setupSwitch();
  if (nranks > 1 && !comm.config().planRules().empty() && portPairs && settings.relayAll) {
    // Plans' port channels have no resend; the relay's host collectives do.
    PB_LOG(Warn, "GPUCOLL", "rank " << rank << ": the YAML's plans are set aside: failover is on and a pair goes "
                                       "through the proxy, so every GPU call takes the host relay, which fails over");
  } else if (nranks > 1 && !comm.config().planRules().empty()) {
    const int64_t planBytes = comm.config().getInt("gpu_plan_max_bytes");
    if (planBytes < 1) throw Error(ErrorCode::Config, "gpu_plan_max_bytes must be at least 1, got " +
                                                        std::to_string(planBytes));
    // A failed plan call tells the peers as a failed built-in call does.
    plans = std::make_unique<GpuPlanSelection>(comm, static_cast<size_t>(planBytes), [this](const Error& e) {
      std::lock_guard<std::mutex> lock(noticeMu);
      notices.sendOnce(e.what());
    });
  }
  // No peer may write into our scratch before it is zeroed and mapped everywhere.
  comm.bootstrap().barrier();
  notices.dropStale();
  abortHook = comm.impl_->addAbortHook([this] { abortDeviceWaits(); });
  NoticeWatcher& watcher = *comm.impl_->noticeWatcher;
  for (FailureNotices* channel : {&notices, comm.impl_->notices.get()})
    noticeWatches.push_back(watcher.watch(*channel, [this] { watchNotices(); }));
}

void GpuCollectives::Impl::setupSwitch() {
  const std::string& mode = settings.switchMode;
  if (mode == "off") return;
  if (portPairs) {  // agreed on every rank: no rank asks the group transport
    if (mode == "auto") return;
    throw Error(ErrorCode::Config, "rank " + std::to_string(rank) + ": gpu_switch=" + mode +
                                       " needs every pair of the communicator mapped on one host; some pair goes "
                                       "through the proxy (a network transport)");
  }
  if (mode == "auto") {
    const std::string refusal = SwitchChannel::multicastRefusalFor(comm);
    if (!refusal.empty()) {
      PB_LOG(Info, "COLL", "rank " << rank << ": no SwitchChannel algorithms: " << refusal);
      return;
    }
  }
  // The switch kernels give each (rank, block) a fixed cell of the buffer.
  switchCellBytes = settings.switchBytes / static_cast<uint64_t>(nranks) / blocks / 16 * 16;
  if (settings.switchChunkBytes && settings.switchChunkBytes < switchCellBytes)
    switchCellBytes = settings.switchChunkBytes;
  if (switchCellBytes < 16)
    throw Error(ErrorCode::Config, "gpu_switch_bytes (" + std::to_string(settings.switchBytes) + ") must give each of " +
                                       std::to_string(nranks) + " ranks x " + std::to_string(blocks) +
                                       " blocks at least 16 bytes: raise it or lower gpu_blocks");
  const SwitchMode want = mode == "peers" ? SwitchMode::Peers : SwitchMode::Multicast;
  try {
    switchChannel = std::make_unique<SwitchChannel>(comm, settings.switchBytes, want);
  } catch (const Error& e) {
    // SwitchChannel fails on every rank together, so all go on without it.
    if (mode != "auto") throw;
    PB_LOG(Warn, "COLL", "rank " << rank << ": no SwitchChannel algorithms: " << e.what());
    return;
  }
  switchHandle = switchChannel->deviceHandle();
}

void GpuCollectives::Impl::abortDeviceWaits() const noexcept {
  // ctx.abortFlag ends the semaphore and port waits; the PortChannelService
  // (Fifo pushes) has its own abort hook.
  __atomic_store_n(&flags[0], 1u, __ATOMIC_RELEASE);
  if (plans) plans->abortWaits();
}

void GpuCollectives::Impl::checkDevice() const {
  int current = -1;
  PB_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device)
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank) + ": GPU collectives were set up on device " +
                                             std::to_string(device) + " but device " + std::to_string(current) +
                                             " is current");
}

GpuCollectives::GpuCollectives(Communicator& comm) : impl_(std::make_unique<Impl>(comm)) { impl_->setup(); }

GpuCollectives::~GpuCollectives() = default;

Communicator& GpuCollectives::communicator() const { return impl_->comm; }

uint64_t GpuCollectives::callsServedByPlans() const { return impl_->plans ? impl_->plans->callsServed() : 0; }

std::string GpuCollectives::switchBackend() const {
  return impl_->switchChannel ? switchBackendName(impl_->switchChannel->backend()) : "";
}

}  // namespace plugboard
