// GpuPlanExecutor: a rank's plan flattened into device arrays (plan_device.hpp)
// and run by plan_kernel.cu. This rank's storage, registered once and
// mapped (memory channels) or imported (port channels) by its peers:
//   [0, counters)  inbound counters, uint64 per [channel][slice]: a peer's
//                  signal on its matching channel adds 1 to ours
//   output, scratch, and an input copy (port channels put from registered
//                  memory only; a peer's get may read it), each chunk of up
//                  to maxChunkBytes
//   packets        LL plans: two halves (odd and even calls) of packetChunks
//                  chunks of 2 * maxChunkBytes (16 bytes per 8 of payload)
// The layout is a function of the plan, slices and maxInputBytes, which
// every rank shares, so a peer computes where to signal and put.
//
// The storage is device memory, except where a port channel's transport
// does not map peer memory (ethernet, libfabric, ucx): there it is pinned
// host memory mapped into the device, as GpuCollectives' port area is, so
// the transport writes it by its own hand. Landing in device memory would
// take a CUDA copy that can queue behind the very kernel waiting for it.
//
// A buffer bound to a switch channel (version 5) lives in that channel's
// buffer instead (its storage area stays unused): peers reach it only
// through the channel, which the loader guarantees.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <tuple>

#include "communicator/communicator_impl.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/plans/plan_kernel.hpp"
#include "plans/call_overlap.hpp"
#include "plans/output_homes.hpp"
#include "plans/plan_call.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/plan_executor.hpp"
#include "plugboard/gpu/port_channel.hpp"
#include "plugboard/gpu/switch_channel.hpp"

namespace plugboard {

namespace {
constexpr int kStorageTag = 0x2d504c10;  // below 2^30, apart from HostPlanExecutor's tags

uint64_t roundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

gpuplan::DevChunk devChunk(const PlanChunk& c) {
  return gpuplan::DevChunk{c.index, static_cast<uint32_t>(c.size), static_cast<uint8_t>(c.buffer)};
}
}  // namespace

struct GpuPlanExecutor::Impl {
  Communicator& comm;
  Plan plan;
  size_t maxInputBytes;
  int slices = 1;
  int device = -1;
  uint32_t threads = 512;
  int64_t timeoutNs = 0;

  // Storage layout (same on every rank).
  uint64_t maxChunkBytes = 0, outputAt = 0, scratchAt = 0, inputAt = 0, packetsAt = 0, packetHalfBytes = 0, total = 0;
  bool copiesInput = false;  // a port channel puts from the input: it must be in the storage
  bool hostStorage = false;  // see the top of this file
  bool reduces = false;      // some operation reduces (avg divides its output)
  bool switchReduces = false;  // some operation reduces through a switch channel
  // Out-of-place simple plans: output chunks that only this rank's blocks
  // touch are named kCallerOutput in the device ops (see chunksInStorage).
  bool callerOutputChunks = false;
  std::vector<bool> outputInStorage;

  char* storage = nullptr;      // device address (of the host allocation, with hostStorage)
  char* storageHost = nullptr;  // the pinned host allocation, with hostStorage
  uint64_t* expected = nullptr;
  uint64_t* calls = nullptr;  // LL: per CUDA block
  gpuplan::PlanBarrier* barriers = nullptr;  // per barrier group and slice
  gpuplan::DevOp* ops = nullptr;
  gpuplan::DevThreadBlock* threadBlocks = nullptr;
  gpuplan::DevChunk* srcs = nullptr;
  int32_t* handshakes = nullptr;
  uint32_t* sliceDone = nullptr;
  uint8_t* outputHomes = nullptr;
  bool blocksHandshake = false;  // every channel's operations are in one thread block (see assignHandshakes)
  gpuplan::DevChannel* channels = nullptr;
  PortChannelDeviceHandle* ports = nullptr;
  uint32_t* flags = nullptr;  // mapped host: [0] abort, then a PlanStatus
  uint32_t* flagsDev = nullptr;

  RegisteredMemory local;
  std::map<int, std::shared_ptr<Connection>> connections;
  std::map<int, RemoteMemory> remotes;
  std::unique_ptr<PortChannelService> service;
  std::vector<std::unique_ptr<SwitchChannel>> switches;  // the plan's switch channels, in its order
  std::vector<PortChannel> portChannels;
  std::vector<int32_t> portBase;  // per plan channel: first index in ports, or -1
  uint64_t abortHook = 0;
  uint64_t noticeWatch = 0;                    // NoticeWatcher id: a peer's reported failure ends our waits
  std::atomic<bool> endedByNotice{false};      // that watch set the abort flag
  std::function<void(const Error&)> tell;      // whenFailing(); empty: Communicator::reportFailure
  mutable std::mutex tellMu;                   // tell, told
  mutable bool told = false;                   // a failure of this rank's went to tell

  const std::string whoText;  // who(), made once: run() names it on every call

  Impl(Communicator& c, Plan p, size_t maxBytes)
      : comm(c),
        plan(std::move(p)),
        maxInputBytes(maxBytes),
        whoText("rank " + std::to_string(c.rank()) + " (GPU plan " + plan.name + " from " + plan.source + ")") {}
  ~Impl();

  const PlanRank& mine() const { return plan.ranks[comm.rank()]; }
  /// "rank 3 (GPU plan NAME from FILE)", the start of every error.
  const std::string& who() const { return whoText; }
  gpuplan::PlanStatus* status() const { return reinterpret_cast<gpuplan::PlanStatus*>(flags + 4); }
  /// Ends this executor's device waits (Communicator::abort, a peer's
  /// notice): the plan's own, and its port channels' Fifo pushes and
  /// flushes, which wait on the service's flag (a flush whose proxy waits
  /// on a failed peer would otherwise run to gpu_wait_timeout).
  void abortWaits() const {
    __atomic_store_n(&flags[0], 1u, __ATOMIC_RELEASE);
    if (service) service->abort();
  }
  /// Throws the failure this rank recorded (device or proxy), after
  /// telling the peers once; returns when there is none.
  void throwOwnFailure() const;
  /// Tells the peers of e once (tell, or Communicator::reportFailure).
  void report(const Error& e) const;

  void setup(int slicesArg);
  void chooseShape(int slicesArg);
  int ranksOnThisGpu() const;
  void agree(const std::string& problem);
  void connect();
  void allocate();
  void exchange();
  void makePorts();
  /// Collective: a SwitchChannel per plan switch channel, sized for its buffer.
  void makeSwitches();
  /// This rank's copy of a buffer bound to a switch channel, or null.
  char* switchBuffer(PlanChunk::Buffer buffer) const;
  /// Why a call of `bytes` of type and op cannot run through the plan's
  /// switch channels ("" when it can); words: the 32-bit words per switch
  /// access it would take. A function of the arguments every rank shares.
  std::string switchProblem(size_t bytes, DataType type, ReduceOp op, uint32_t* words) const;

  void uploadPlan();
  /// A chunk this rank's own operation reads or writes here, as the device names it.
  gpuplan::DevChunk localChunk(const PlanChunk& c) const;
  std::vector<std::vector<int32_t>> assignHandshakes();
  /// LL: the rank whose put_packet writes this rank's packets chunk, or -1.
  int packetWriter(uint64_t chunk) const;
  void appendFinalFlushes(const PlanThreadBlock& tb, std::vector<gpuplan::DevOp>& ops) const;
  /// Why this rank's plan cannot run here as to waits, or "".
  std::string waitsProblem() const;
  std::vector<gpuplan::DevChannel> deviceChannels() const;
  /// Index of `rank`'s channel to `peer` of this type and tag.
  int matchingChannel(int rank, int peer, PlanChannel::Type type, int64_t tag) const;
  /// True when some rank's `kind` operation reads an input chunk. A get's
  /// (peers' mappings reach the input only in the storage) or a switch
  /// broadcast's (it reads the storage's aligned copy) makes every rank keep
  /// its input in the storage: a plan-wide answer, so every rank lays its
  /// storage out alike.
  bool readsAnInput(PlanOp::Kind kind) const;
  gpuplan::PlanArgs args(const void* input, size_t bytes) const;
  std::string describeFailure(const gpuplan::PlanStatus& s) const;
  /// True when the failure is a barrier's.
  bool barrierOp(const gpuplan::PlanStatus& s) const;
};

GpuPlanExecutor::Impl::~Impl() {
  if (abortHook) comm.impl_->removeAbortHook(abortHook);
  const bool aborted = comm.aborted();
  if (storage) cudaDeviceSynchronize();  // every device wait is bounded
  if (noticeWatch) comm.impl_->noticeWatcher->unwatch(noticeWatch);
  if (service && !aborted) service->waitIdle(std::chrono::milliseconds(timeoutNs / 1000000 + 1000));
  // Peers map this storage: every rank's kernels are done before it goes.
  if (storage && !aborted && comm.size() > 1) {
    try {
      comm.bootstrap().barrier();
    } catch (const std::exception&) {
    }
  }
  portChannels.clear();
  service.reset();
  switches.clear();
  remotes.clear();
  local = RegisteredMemory();
  if (storageHost) cudaFreeHost(storageHost);
  else if (storage) cudaFree(storage);
  for (void* p : {static_cast<void*>(handshakes), static_cast<void*>(sliceDone), static_cast<void*>(expected),
                  static_cast<void*>(calls), static_cast<void*>(barriers), static_cast<void*>(ops),
                  static_cast<void*>(threadBlocks), static_cast<void*>(srcs), static_cast<void*>(channels),
                  static_cast<void*>(ports), static_cast<void*>(outputHomes)})
    if (p) cudaFree(p);
  if (flags) cudaFreeHost(flags);
}

// Every rank learns whether any rank failed before the collective steps, so
// none waits for a peer that gave up.
void GpuPlanExecutor::Impl::agree(const std::string& problem) {
  std::vector<int32_t> failed(comm.size(), 0);
  failed[comm.rank()] = problem.empty() ? 0 : 1;
  if (comm.size() > 1) comm.bootstrap().allGather(failed.data(), sizeof(int32_t));
  if (!problem.empty()) throw Error(ErrorCode::InvalidUsage, who() + ": " + problem);
  for (int r = 0; r < comm.size(); ++r)
    if (failed[r])
      throw Error(ErrorCode::InvalidUsage, who() + ": rank " + std::to_string(r) +
                                               " could not set up the plan (its error says why)");
}

// Ranks of this communicator on this rank's GPU (same host, same PCI bus id).
int GpuPlanExecutor::Impl::ranksOnThisGpu() const {
  char bus[64] = {};
  PB_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), device));
  const uint64_t mine = std::hash<std::string>{}(comm.hostOf(comm.rank()) + "/" + bus);
  std::vector<uint64_t> all(comm.size(), 0);
  all[comm.rank()] = mine;
  if (comm.size() > 1) comm.bootstrap().allGather(all.data(), sizeof(uint64_t));
  return static_cast<int>(std::count(all.begin(), all.end(), mine));
}

void GpuPlanExecutor::Impl::chooseShape(int slicesArg) {
  const Config& cfg = comm.config();
  const int64_t setting = cfg.getInt("gpu_plan_slices");
  const int64_t t = cfg.getInt("gpu_threads");
  if (t < 64 || t > int64_t(gpuplan::kMaxThreads) || t % 32)
    throw Error(ErrorCode::Config, who() + ": gpu_threads must be a multiple of 32 in 64-512, got " + std::to_string(t));
  threads = static_cast<uint32_t>(t);
  const double timeout = cfg.getDouble("gpu_wait_timeout");
  if (!(timeout >= 0.001 && timeout <= 86400))
    throw Error(ErrorCode::Config, who() + ": gpu_wait_timeout must be between 0.001 and 86400 seconds");
  timeoutNs = static_cast<int64_t>(timeout * 1e9);
  int sms = 0;
  PB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int tbs = std::max<int>(1, static_cast<int>(mine().threadblocks.size()));
  if (setting < 0 || setting > 1024)
    throw Error(ErrorCode::Config, who() + ": gpu_plan_slices must be 0 (automatic) to 1024, got " + std::to_string(setting));
  // Automatic: fill the GPU, at most 64 slices (1.05-1.40x NCCL's time on
  // 2 x H200 where 16 gave 1.21-1.64x, docs/perf/2026-11-26-gpu-plans-2xh200.md);
  // with buffers in host memory as many as gpu_port_blocks (each slice's put
  // is a proxy request, a network message: few and large).
  const int cap = hostStorage ? static_cast<int>(std::clamp<int64_t>(cfg.getInt("gpu_port_blocks"), 1, 128)) : 64;
  const int sharing = ranksOnThisGpu();
  slices = slicesArg > 0 ? slicesArg : setting > 0 ? static_cast<int>(setting) : std::clamp(sms / (tbs * sharing), 1, cap);
  // A plan's instances are slices: copies of every thread block on 1/n of
  // every chunk, with semaphores of their own. It asks for at least that many.
  slices = std::max<int>(slices, static_cast<int>(plan.instances));
  // Every rank uses the same count (the storage layout depends on it): the
  // smallest (ranks may see different SM counts, e.g. under MPS).
  std::vector<int32_t> all(comm.size(), 0);
  all[comm.rank()] = slices;
  if (comm.size() > 1) comm.bootstrap().allGather(all.data(), sizeof(int32_t));
  slices = *std::min_element(all.begin(), all.end());
  // Thread blocks wait on each other through the peers: all of them, of
  // every rank on this GPU, must be resident at once, one per SM at most.
  std::string problem;
  if (int64_t(slices) * tbs * sharing > sms)
    problem = std::to_string(tbs) + " thread blocks x " + std::to_string(slices) + " slices = " +
              std::to_string(int64_t(slices) * tbs) + " CUDA blocks, more than the " + std::to_string(sms) +
              " SMs of device " + std::to_string(device) + " shared by " + std::to_string(sharing) +
              " rank(s) allow (every block must be resident): lower gpu_plan_slices";
  agree(problem);  // every rank leaves here together, none waits in the exchange for one that gave up
}

void GpuPlanExecutor::Impl::setup(int slicesArg) {
  PB_CUDA_CHECK(cudaGetDevice(&device));
  std::string problem;
  if (plan.nranks != comm.size())
    problem = "the plan is for " + std::to_string(plan.nranks) + " ranks, the communicator has " + std::to_string(comm.size());
  if (problem.empty()) problem = waitsProblem();
  agree(problem);
  std::vector<uint64_t> sizes(comm.size(), 0);
  sizes[comm.rank()] = maxInputBytes;
  if (comm.size() > 1) comm.bootstrap().allGather(sizes.data(), sizeof(uint64_t));
  for (int r = 0; r < comm.size(); ++r)
    if (sizes[r] != maxInputBytes)
      throw Error(ErrorCode::InvalidUsage, who() + ": made for inputs of up to " + std::to_string(maxInputBytes) +
                                               " bytes, rank " + std::to_string(r) + " for " + std::to_string(sizes[r]) +
                                               " (every rank must pass the same)");
  connect();
  chooseShape(slicesArg);
  allocate();
  makeSwitches();
  exchange();
  makePorts();
  uploadPlan();
  PB_CUDA_CHECK(cudaDeviceSynchronize());  // zeroed before any peer can signal into it
  if (comm.size() > 1) comm.bootstrap().barrier();
  abortHook = comm.impl_->addAbortHook([this] { abortWaits(); });
  noticeWatch = comm.impl_->noticeWatcher->watch(*comm.impl_->notices, [this] {
    endedByNotice.store(true, std::memory_order_release);
    abortWaits();
  });
}

void GpuPlanExecutor::Impl::connect() {
  std::vector<int> peers;
  for (const auto& c : mine().channels)
    if (std::find(peers.begin(), peers.end(), c.peer) == peers.end()) peers.push_back(c.peer);
  std::sort(peers.begin(), peers.end());
  for (int p : peers) comm.connect(p, MemoryKind::Cuda);
  comm.setup();
  std::string problem;
  for (int p : peers) connections[p] = comm.connection(p, MemoryKind::Cuda);
  const auto& chans = mine().channels;
  for (size_t i = 0; i < chans.size() && problem.empty(); ++i) {
    const auto& conn = connections.at(chans[i].peer);
    if (chans[i].type == PlanChannel::Type::Memory && !conn->mapsPeerMemory())
      problem = "channel " + std::to_string(i) + " to rank " + std::to_string(chans[i].peer) + " (host " +
                comm.hostOf(chans[i].peer) + ") is a memory channel, but the pair's transport " + conn->transport() +
                " does not map peer memory: use port channels (plugboard_dsl channel=\"port\") or a mapping transport (cudaipc)";
    if (chans[i].type == PlanChannel::Type::Port && plan.ll())
      problem = "channel " + std::to_string(i) + " to rank " + std::to_string(chans[i].peer) +
                " is a port channel, but LL packets on GPU buffers travel over memory channels only (a transport's "
                "own writes do not keep 16-byte packets whole): use plugboard_dsl channel=\"memory\" and a mapping "
                "transport (cudaipc), or a simple plan";
    if (chans[i].type == PlanChannel::Type::Port) copiesInput = true;
    if (chans[i].type == PlanChannel::Type::Port && !conn->mapsPeerMemory()) hostStorage = true;
  }
  if (readsAnInput(PlanOp::Kind::Get) || readsAnInput(PlanOp::Kind::SwitchBroadcast)) copiesInput = true;
  // Every rank stores alike (the layout is shared); memory channels need device storage.
  int32_t host = hostStorage ? 1 : 0;
  std::vector<int32_t> hosts(comm.size(), 0);
  hosts[comm.rank()] = host;
  if (comm.size() > 1) comm.bootstrap().allGather(hosts.data(), sizeof(int32_t));
  for (int32_t h : hosts) hostStorage = hostStorage || h;
  for (size_t i = 0; i < chans.size() && problem.empty(); ++i)
    if (hostStorage && chans[i].type == PlanChannel::Type::Memory)
      problem = "channel " + std::to_string(i) + " to rank " + std::to_string(chans[i].peer) +
                " is a memory channel, but the plan's port channels go over a transport that does not map peer "
                "memory (its buffers are then pinned host memory, which memory channels cannot map): use one "
                "channel type per plan";
  agree(problem);
}

void GpuPlanExecutor::Impl::allocate() {
  const uint64_t n = mine().channels.size();
  maxChunkBytes = roundUp((maxInputBytes + plan.inputChunks - 1) / plan.inputChunks, 16);
  outputAt = roundUp(std::max<uint64_t>(n * slices * sizeof(uint64_t), 1), 256);
  // A buffer bound to a switch channel lives in that channel's buffer (no
  // peer reaches it here: the loader refuses puts and gets into it).
  const auto areaBytes = [&](PlanChunk::Buffer b, uint64_t chunks) {
    return plan.switchOf(b) >= 0 ? 0 : roundUp(chunks * maxChunkBytes, 256);
  };
  scratchAt = outputAt + areaBytes(PlanChunk::Buffer::Output, plan.outputChunks);
  inputAt = scratchAt + areaBytes(PlanChunk::Buffer::Scratch, plan.scratchChunks);
  // Port channels put from the input: with an out-of-place plan it is copied in.
  packetsAt = inputAt + (copiesInput && !plan.inPlace ? roundUp(plan.inputChunks * maxChunkBytes, 256) : 0);
  packetHalfBytes = roundUp(plan.packetChunks * 2 * maxChunkBytes, 256);
  total = packetsAt + 2 * packetHalfBytes;
  if (copiesInput && total > 0xffffffffull)
    throw Error(ErrorCode::InvalidUsage, who() + ": " + std::to_string(total) + " bytes of storage for inputs of " +
                                             std::to_string(maxInputBytes) +
                                             " bytes; port channels address at most 4 GiB - 1: make the executor for smaller inputs");
  if (hostStorage) {
    PB_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&storageHost), total, cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(storageHost, 0, total);
    PB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&storage), storageHost, 0));
  } else {
    PB_CUDA_CHECK(cudaMalloc(&storage, total));
    PB_CUDA_CHECK(cudaMemset(storage, 0, total));
  }
  PB_CUDA_CHECK(cudaMalloc(&expected, std::max<uint64_t>(n * slices, 1) * sizeof(uint64_t)));
  PB_CUDA_CHECK(cudaMemset(expected, 0, std::max<uint64_t>(n * slices, 1) * sizeof(uint64_t)));
  if (plan.ll()) {
    const uint64_t blocks = std::max<uint64_t>(mine().threadblocks.size() * slices, 1);
    PB_CUDA_CHECK(cudaMalloc(&calls, blocks * sizeof(uint64_t)));
    PB_CUDA_CHECK(cudaMemset(calls, 0, blocks * sizeof(uint64_t)));
  }
  if (mine().barriers > 0) {
    const uint64_t n = static_cast<uint64_t>(mine().barriers) * slices * sizeof(gpuplan::PlanBarrier);
    PB_CUDA_CHECK(cudaMalloc(&barriers, n));
    PB_CUDA_CHECK(cudaMemset(barriers, 0, n));
  }
  PB_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flags), 64, cudaHostAllocMapped));
  std::memset(flags, 0, 64);
  PB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flagsDev), flags, 0));
}

void GpuPlanExecutor::Impl::exchange() {
  local = hostStorage ? comm.registerMemory(storageHost, total, MemoryKind::Host)
                      : comm.registerMemory(storage, total, MemoryKind::Cuda);
  for (const auto& [p, conn] : connections) comm.sendMemory(local, p, kStorageTag);  // buffered: no order needed
  for (const auto& [p, conn] : connections) {
    remotes[p] = comm.recvMemory(p, kStorageTag);
    if (remotes[p].size() != total)
      throw Error(ErrorCode::Remote, who() + ": rank " + std::to_string(p) + "'s plan storage has " +
                                         std::to_string(remotes[p].size()) + " bytes, ours " + std::to_string(total) +
                                         " (a different plan, slice count or gpu_threads?)");
  }
}

// Port channel set-up is collective with the peer: every rank adds them in
// one global order of (lower rank, higher rank, tag), then slice, which both
// ends of a pair share, so no two ranks wait on each other in a cycle.
void GpuPlanExecutor::Impl::makePorts() {
  const auto& chans = mine().channels;
  portBase.assign(chans.size(), -1);
  using Key = std::tuple<int, int, int64_t>;
  std::vector<std::pair<Key, size_t>> order;
  const int me = comm.rank();
  for (size_t i = 0; i < chans.size(); ++i)
    if (chans[i].type == PlanChannel::Type::Port)
      order.push_back({{std::min(me, chans[i].peer), std::max(me, chans[i].peer), chans[i].tag}, i});
  if (order.empty()) return;
  std::sort(order.begin(), order.end());
  service = std::make_unique<PortChannelService>(comm);
  for (const auto& [key, i] : order) {
    portBase[i] = static_cast<int32_t>(portChannels.size());
    for (int s = 0; s < slices; ++s)
      portChannels.push_back(service->addChannel(connections.at(chans[i].peer), local, remotes.at(chans[i].peer)));
  }
  std::vector<PortChannelDeviceHandle> handles;
  for (const auto& pc : portChannels) handles.push_back(pc.deviceHandle());
  PB_CUDA_CHECK(cudaMalloc(&ports, handles.size() * sizeof(PortChannelDeviceHandle)));
  PB_CUDA_CHECK(cudaMemcpy(ports, handles.data(), handles.size() * sizeof(PortChannelDeviceHandle), cudaMemcpyHostToDevice));
}

void GpuPlanExecutor::Impl::makeSwitches() {
  for (const PlanSwitch& sw : mine().switches) {
    const uint64_t chunks = sw.buffer == PlanChunk::Buffer::Output ? plan.outputChunks : plan.scratchChunks;
    switches.push_back(std::make_unique<SwitchChannel>(comm, std::max<uint64_t>(chunks * maxChunkBytes, 16)));
    PB_CUDA_CHECK(cudaMemset(switches.back()->deviceHandle().local, 0, switches.back()->bytes()));
  }
}

char* GpuPlanExecutor::Impl::switchBuffer(PlanChunk::Buffer buffer) const {
  const int i = plan.switchOf(buffer);
  return i < 0 ? nullptr : switches.at(i)->deviceHandle().local;
}

std::string GpuPlanExecutor::Impl::switchProblem(size_t bytes, DataType type, ReduceOp op, uint32_t* words) const {
  *words = 4;
  if (switches.empty()) return "";
  const ReduceOp reduced = op == ReduceOp::Avg ? ReduceOp::Sum : op;  // avg: a sum, divided at the end
  if (switchReduces && !SwitchChannel::supports(type, reduced))
    return std::string("its switch channels reduce float32 sum and float16 / bfloat16 sum, min and max, not ") +
           dataTypeName(type) + " " + reduceOpName(op);
  // Every buffer a switch operation touches starts 256-aligned (storage,
  // switch buffers, the input copy; run() keeps chunks out of a caller's
  // output that is not 16-aligned), so chunk offsets decide.
  const uint64_t chunkBytes = bytes / plan.inputChunks;
  *words = chunkBytes % 16 == 0 ? 4 : chunkBytes % 8 == 0 ? 2 : 1;
  if (chunkBytes % 4)
    return "its switch channels move 4-byte words, and its chunks are " + std::to_string(chunkBytes) + " bytes";
  return "";
}

int GpuPlanExecutor::Impl::matchingChannel(int rank, int peer, PlanChannel::Type type, int64_t tag) const {
  const auto& chans = plan.ranks[rank].channels;
  for (size_t i = 0; i < chans.size(); ++i)
    if (chans[i].peer == peer && chans[i].type == type && chans[i].tag == tag) return static_cast<int>(i);
  throw Error(ErrorCode::Internal, who() + ": rank " + std::to_string(rank) + " has no channel to rank " +
                                       std::to_string(peer) + " with tag " + std::to_string(tag));  // the loader checks this
}

bool GpuPlanExecutor::Impl::readsAnInput(PlanOp::Kind kind) const {
  for (const auto& rank : plan.ranks)
    for (const auto& tb : rank.threadblocks)
      for (const auto& o : tb.ops)
        if (o.kind == kind && o.src.buffer == PlanChunk::Buffer::Input) return true;
  return false;
}

std::vector<gpuplan::DevChannel> GpuPlanExecutor::Impl::deviceChannels() const {
  std::vector<gpuplan::DevChannel> out;
  const auto& chans = mine().channels;
  for (size_t i = 0; i < chans.size(); ++i) {
    gpuplan::DevChannel d{};
    d.port = portBase[i];
    if (chans[i].type == PlanChannel::Type::Memory) {
      const auto& conn = connections.at(chans[i].peer);
      char* base = static_cast<char*>(conn->remotePointer(remotes.at(chans[i].peer)));
      d.remote[gpuplan::kInput] = copiesInput ? base + (plan.inPlace ? outputAt : inputAt) : nullptr;
      d.remote[gpuplan::kOutput] = base + outputAt;
      d.remote[gpuplan::kScratch] = base + scratchAt;
      d.remote[gpuplan::kPackets] = base + packetsAt;
      const int theirs = matchingChannel(chans[i].peer, comm.rank(), chans[i].type, chans[i].tag);
      d.remoteInbound = reinterpret_cast<uint64_t*>(base) + static_cast<uint64_t>(theirs) * slices;
    }
    out.push_back(d);
  }
  return out;
}

template <typename T>
static void upload(T** dst, const std::vector<T>& v) {
  PB_CUDA_CHECK(cudaMalloc(dst, std::max<size_t>(v.size(), 1) * sizeof(T)));
  if (!v.empty()) PB_CUDA_CHECK(cudaMemcpy(*dst, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// Thread 0 of one CUDA block waits on each (channel, slice) counter and
// keeps the count consumed: a channel's waits must all be in one thread block.
std::string GpuPlanExecutor::Impl::waitsProblem() const {
  std::vector<int64_t> waiter(mine().channels.size(), -1);
  for (const auto& tb : mine().threadblocks)
    for (const auto& op : tb.ops) {
      if (op.kind != PlanOp::Kind::Wait) continue;
      int64_t& w = waiter[op.channel];
      if (w >= 0 && w != tb.id)
        return "thread blocks " + std::to_string(w) + " and " + std::to_string(tb.id) + " both wait on channel " +
               std::to_string(op.channel) + "; the GPU executor needs each channel's waits in one thread block";
      w = tb.id;
    }
  return "";
}

// A thread block ends with a flush of every port channel it put on: the
// proxy has read its sources before the kernel ends, so the next call's
// input copy and operations cannot change bytes still on their way out.
void GpuPlanExecutor::Impl::appendFinalFlushes(const PlanThreadBlock& tb, std::vector<gpuplan::DevOp>& ops) const {
  std::vector<int> putOn;
  for (const auto& op : tb.ops)
    if (op.kind == PlanOp::Kind::Put && mine().channels[op.channel].type == PlanChannel::Type::Port &&
        std::find(putOn.begin(), putOn.end(), op.channel) == putOn.end())
      putOn.push_back(op.channel);
  for (int c : putOn) {
    gpuplan::DevOp d{};
    d.kind = gpuplan::OpKind::Flush;
    d.channel = c;
    ops.push_back(d);
  }
}

// The plan kernel's blocks make the start handshake themselves (no
// handshake kernel, one launch per call) when, on every rank, each
// channel's operations are all in one thread block (channelsStayInOneBlock):
// that block handshakes it, and a block then never touches a channel whose
// peer has not started this call. A channel without operations here is
// thread block 0's (its peer may still put through it). Otherwise the
// handshake kernel makes every channel's first, on every rank: blocks
// handshake only the call's active slices, the kernel every slice, so the
// two ends of a channel must not mix them.
//
// Plans need no handshake at all (plans/call_overlap.hpp) when they are LL
// with packets going both ways on every pair, or when every access of a
// peer's buffers happens after an operation of the peer's call and before
// another (allreduce_switch). Every rank decides alike: same plan.
std::vector<std::vector<int32_t>> GpuPlanExecutor::Impl::assignHandshakes() {
  const auto& tbs = mine().threadblocks;
  std::vector<std::vector<int32_t>> lists(tbs.size());
  if (callsNeedNoHandshake(plan) || accessesStayInsideTheOwnersCall(plan)) {
    blocksHandshake = true;  // no handshake kernel either, on a rank without thread blocks too
    return lists;
  }
  blocksHandshake = !tbs.empty() && channelsStayInOneBlock(plan);
  if (!blocksHandshake) return lists;
  std::vector<int64_t> owner(mine().channels.size(), -1);
  for (size_t t = 0; t < tbs.size(); ++t)
    for (const auto& op : tbs[t].ops)
      if (op.channel >= 0) owner[op.channel] = static_cast<int64_t>(t);
  for (size_t c = 0; c < owner.size(); ++c) lists[owner[c] < 0 ? 0 : owner[c]].push_back(static_cast<int32_t>(c));
  return lists;
}

int GpuPlanExecutor::Impl::packetWriter(uint64_t chunk) const {
  for (int r = 0; r < plan.nranks; ++r)
    for (const auto& tb : plan.ranks[r].threadblocks)
      for (const auto& op : tb.ops)
        if (op.kind == PlanOp::Kind::PutPacket && plan.ranks[r].channels[op.channel].peer == comm.rank() &&
            op.dst.index <= chunk && chunk < op.dst.index + op.dst.size)
          return r;
  return -1;
}

gpuplan::DevChunk GpuPlanExecutor::Impl::localChunk(const PlanChunk& c) const {
  gpuplan::DevChunk d = devChunk(c);
  if (callerOutputChunks && c.buffer == PlanChunk::Buffer::Output && c.size > 0 && !outputInStorage.at(c.index))
    d.buffer = gpuplan::kCallerOutput;
  return d;
}

void GpuPlanExecutor::Impl::uploadPlan() {
  // In-place plans read their input where the output is (the storage's);
  // LL plans write their output in the caller's buffer already.
  callerOutputChunks = !plan.inPlace && !plan.ll() && plan.switchOf(PlanChunk::Buffer::Output) < 0;
  outputInStorage = chunksInStorage(plan, comm.rank(), PlanChunk::Buffer::Output, false);
  std::vector<uint8_t> homes(plan.outputChunks, gpuplan::kOutput);
  for (size_t k = 0; k < homes.size(); ++k)
    if (callerOutputChunks && !outputInStorage[k]) homes[k] = gpuplan::kCallerOutput;
  std::vector<gpuplan::DevOp> o;
  std::vector<gpuplan::DevThreadBlock> t;
  std::vector<gpuplan::DevChunk> s;
  std::vector<int32_t> h;
  const auto lists = assignHandshakes();
  for (size_t i = 0; i < mine().threadblocks.size(); ++i) {
    const auto& tb = mine().threadblocks[i];
    t.push_back({static_cast<uint32_t>(o.size()), static_cast<uint32_t>(tb.ops.size()),
                 static_cast<uint32_t>(h.size()), static_cast<uint32_t>(lists[i].size())});
    h.insert(h.end(), lists[i].begin(), lists[i].end());
    for (size_t i = 0; i < tb.ops.size(); ++i) {
      const PlanOp& p = tb.ops[i];
      if (p.srcs.size() + p.packets.size() > gpuplan::kMaxReduceSources)
        throw Error(ErrorCode::InvalidUsage, who() + ": thread block " + std::to_string(tb.id) + " operation " +
                                                 std::to_string(i) + " reduces " +
                                                 std::to_string(p.srcs.size() + p.packets.size()) +
                                                 " chunks; the GPU executor reduces at most " +
                                                 std::to_string(gpuplan::kMaxReduceSources));
      gpuplan::DevOp d{};
      d.kind = static_cast<gpuplan::OpKind>(p.kind);
      d.channel = p.switchChannel >= 0 ? p.switchChannel : p.channel;
      // A put's dst and a get's src are the peer's chunks; the rest are this rank's.
      const bool peersDst = p.kind == PlanOp::Kind::Put || p.kind == PlanOp::Kind::PutPacket;
      d.dst = peersDst ? devChunk(p.dst) : localChunk(p.dst);
      d.src = p.kind == PlanOp::Kind::Get ? devChunk(p.src) : localChunk(p.src);
      d.srcsAt = static_cast<uint32_t>(s.size());
      d.nsrcs = static_cast<uint32_t>(p.srcs.size());
      d.npackets = static_cast<uint32_t>(p.packets.size());
      d.barrier = p.barrier >= 0 ? static_cast<uint32_t>(p.barrier) : 0;
      d.parties = p.parties;
      for (const auto& c : p.srcs) s.push_back(localChunk(c));
      for (const auto& c : p.packets) s.push_back(devChunk(c));
      reduces = reduces || p.kind == PlanOp::Kind::Reduce || p.kind == PlanOp::Kind::ReducePacket ||
                p.kind == PlanOp::Kind::SwitchReduce;
      switchReduces = switchReduces || p.kind == PlanOp::Kind::SwitchReduce;
      o.push_back(d);
    }
    appendFinalFlushes(tb, o);
    t.back().opCount = static_cast<uint32_t>(o.size()) - t.back().opStart;
  }
  upload(&ops, o);
  upload(&threadBlocks, t);
  upload(&handshakes, h);
  upload(&sliceDone, std::vector<uint32_t>(slices, 0));
  upload(&outputHomes, homes);
  upload(&srcs, s);
  upload(&channels, deviceChannels());
}

gpuplan::PlanArgs GpuPlanExecutor::Impl::args(const void* input, size_t bytes) const {
  gpuplan::PlanArgs a{};
  a.ops = ops;
  a.threadBlocks = threadBlocks;
  a.srcs = srcs;
  a.channels = channels;
  a.ports = ports;
  a.inbound = reinterpret_cast<uint64_t*>(storage);
  a.expected = expected;
  a.local[gpuplan::kOutput] = storage + outputAt;
  a.local[gpuplan::kScratch] = storage + scratchAt;
  a.local[gpuplan::kPackets] = storage + packetsAt;
  for (size_t i = 0; i < switches.size(); ++i) a.switches[i] = switches[i]->deviceHandle();
  if (char* out = switchBuffer(PlanChunk::Buffer::Output)) a.local[gpuplan::kOutput] = out;
  if (char* scratch = switchBuffer(PlanChunk::Buffer::Scratch)) a.local[gpuplan::kScratch] = scratch;
  a.local[gpuplan::kCallerOutput] = a.local[gpuplan::kOutput];  // run() may point it at the caller's output
  a.local[gpuplan::kInput] = plan.inPlace ? a.local[gpuplan::kOutput] : copiesInput ? storage + inputAt : static_cast<char*>(const_cast<void*>(input));
  a.storageOffset[gpuplan::kInput] = plan.inPlace ? outputAt : inputAt;
  a.storageOffset[gpuplan::kOutput] = outputAt;
  a.storageOffset[gpuplan::kScratch] = scratchAt;
  a.handshakes = handshakes;
  a.blocksHandshake = blocksHandshake ? 1 : 0;
  a.sliceDone = sliceDone;
  a.outputHomes = outputHomes;
  a.outputChunks = static_cast<uint32_t>(plan.outputChunks);
  a.chunkBytes = bytes / plan.inputChunks;
  // At least 8 bytes per thread (plan_device.hpp): a small call runs fewer slices.
  a.sliceBytes = std::max<uint64_t>(roundUp((a.chunkBytes + slices - 1) / slices, 16), uint64_t(threads) * 8);
  a.activeSlices = static_cast<uint32_t>(std::clamp<uint64_t>((a.chunkBytes + a.sliceBytes - 1) / a.sliceBytes, 1, slices));
  a.packetStride = 2 * roundUp(a.chunkBytes, 8);
  a.packetHalfBytes = packetHalfBytes;
  a.calls = calls;
  a.barriers = barriers;
  a.slices = static_cast<uint32_t>(slices);
  a.threadBlockCount = static_cast<uint32_t>(mine().threadblocks.size());
  a.channelCount = static_cast<uint32_t>(mine().channels.size());
  a.timeoutNs = timeoutNs;
  a.abortFlag = flagsDev;
  a.status = reinterpret_cast<gpuplan::PlanStatus*>(flagsDev + 4);
  return a;
}

bool GpuPlanExecutor::Impl::barrierOp(const gpuplan::PlanStatus& s) const {
  if (s.threadBlock < 0 || size_t(s.threadBlock) >= mine().threadblocks.size()) return false;
  const auto& ops = mine().threadblocks[s.threadBlock].ops;
  return s.op >= 0 && size_t(s.op) < ops.size() && ops[s.op].kind == PlanOp::Kind::Barrier;
}

std::string GpuPlanExecutor::Impl::describeFailure(const gpuplan::PlanStatus& s) const {
  std::string where;
  const auto& chans = mine().channels;
  if (s.threadBlock >= 0 && size_t(s.threadBlock) < mine().threadblocks.size()) {
    const auto& tb = mine().threadblocks[s.threadBlock];
    where = "thread block " + std::to_string(tb.id) + " operation " + std::to_string(s.op);
    if (s.op >= 0 && size_t(s.op) < tb.ops.size()) where += " (" + std::string(planOpName(tb.ops[s.op].kind)) + ")";
    if (size_t(s.op) >= tb.ops.size()) where += " (the flush of its puts after its last operation)";
  } else {
    where = "the start handshake";
  }
  const int writer = s.packetChunk >= 0 ? packetWriter(static_cast<uint64_t>(s.packetChunk)) : -1;
  if (writer >= 0)
    where += " waiting for packets[" + std::to_string(s.packetChunk) + "] from rank " + std::to_string(writer) + " (host " +
             comm.hostOf(writer) + ", " + connections.at(writer)->transport() + ")";
  if (s.channel >= 0 && size_t(s.channel) < chans.size()) {
    const int peer = chans[s.channel].peer;
    const auto& conn = connections.at(peer);
    where += " on channel " + std::to_string(s.channel) + " to rank " + std::to_string(peer) + " (host " +
             comm.hostOf(peer) + ", " + conn->transport() + ")";
  }
  where += ", slice " + std::to_string(s.slice);
  switch (s.code) {
    case gpuplan::kPlanWaitTimeout:
      if (barrierOp(s)) return who() + ": " + where + ": the barrier gave up after gpu_wait_timeout (" +
                                 std::to_string(timeoutNs / 1e9) + " s): a thread block of its group never reached it";
      return who() + ": " + where + ": the wait gave up after gpu_wait_timeout (" + std::to_string(timeoutNs / 1e9) +
             " s): the peer never " + (writer >= 0 ? "sent them" : "signalled") +
             " (stopped, failed, or runs another plan or count)";
    case gpuplan::kPlanAborted: return who() + ": " + where + ": aborted (Communicator::abort)";
    case gpuplan::kPlanFifoFailed: return who() + ": " + where + ": the proxy's queue did not take the request in time";
    default: return who() + ": " + where + ": device failure code " + std::to_string(s.code);
  }
}

GpuPlanExecutor::GpuPlanExecutor(Communicator& comm, Plan plan, size_t maxInputBytes, int slices)
    : impl_(std::make_unique<Impl>(comm, std::move(plan), maxInputBytes)) {
  impl_->setup(slices);
}

GpuPlanExecutor::~GpuPlanExecutor() = default;

const Plan& GpuPlanExecutor::plan() const { return impl_->plan; }
int GpuPlanExecutor::slices() const { return impl_->slices; }
void* GpuPlanExecutor::outputBuffer() const {
  if (char* bound = impl_->switchBuffer(PlanChunk::Buffer::Output)) return bound;
  return impl_->storage + impl_->outputAt;
}

bool GpuPlanExecutor::takes(size_t count, DataType type, ReduceOp op) const {
  uint32_t words = 0;
  return count % impl_->plan.inputChunks == 0 && impl_->switchProblem(count * dataTypeSize(type), type, op, &words).empty();
}

void GpuPlanExecutor::Impl::report(const Error& e) const {
  std::lock_guard<std::mutex> lock(tellMu);
  if (told) return;
  told = true;
  if (tell) tell(e);
  else comm.reportFailure(e.what());
}

void GpuPlanExecutor::Impl::throwOwnFailure() const {
  try {
    if (service) service->checkErrors();
  } catch (const Error& e) {
    if (!comm.aborted()) report(e);
    throw;
  }
  if (__atomic_load_n(&status()->code, __ATOMIC_ACQUIRE) == 0) return;
  gpuplan::PlanStatus s;
  std::memcpy(&s, status(), sizeof(s));
  const Error e(s.code == gpuplan::kPlanAborted ? ErrorCode::Remote : ErrorCode::Timeout, describeFailure(s));
  if (s.code != gpuplan::kPlanAborted) report(e);  // an abort's waits end on every rank alike
  throw e;
}

void GpuPlanExecutor::checkErrors() const {
  const Impl& m = *impl_;
  // The abort flag was set by abort() or by a peer's notice; the waits it
  // ended (code kPlanAborted) are their consequence, so those speak first.
  // A timeout of this rank's own recorded before is its own news.
  if (m.endedByNotice.load(std::memory_order_acquire) && !m.comm.aborted() &&
      __atomic_load_n(&m.status()->code, __ATOMIC_ACQUIRE) != gpuplan::kPlanWaitTimeout)
    if (auto notice = m.comm.impl_->notices->poll(true)) throw *notice;
  m.throwOwnFailure();
}

void GpuPlanExecutor::abortWaits() const noexcept { impl_->abortWaits(); }

void GpuPlanExecutor::whenFailing(std::function<void(const Error&)> tell) {
  std::lock_guard<std::mutex> lock(impl_->tellMu);
  impl_->tell = std::move(tell);
}

void GpuPlanExecutor::run(const void* input, void* output, size_t count, DataType type, ReduceOp op,
                          cudaStream_t stream) {
  Impl& m = *impl_;
  checkErrors();
  const size_t bytes = checkPlanCall(m.plan, m.who(), count, type, m.maxInputBytes, input, output);
  if (!m.plan.inPlace && input == outputBuffer())
    throw Error(ErrorCode::InvalidUsage, m.who() + ": outputBuffer() cannot be the input of an out-of-place plan "
                                                   "(peers write into it while the input is read)");
  if (count > 0 && (!input || !output))
    throw Error(ErrorCode::InvalidUsage, m.who() + ": NULL input or output");
  int current = -1;
  PB_CUDA_CHECK(cudaGetDevice(&current));
  if (current != m.device)
    throw Error(ErrorCode::InvalidUsage, m.who() + ": set up on device " + std::to_string(m.device) + " but device " +
                                             std::to_string(current) + " is current");
  if (bytes == 0) return;  // every rank passes the same count: none runs
  uint32_t words = 0;
  const std::string switchProblem = m.switchProblem(bytes, type, op, &words);
  if (!switchProblem.empty())
    throw Error(ErrorCode::InvalidUsage, m.who() + ": " + std::to_string(count) + " elements of " + dataTypeName(type) +
                                             " " + reduceOpName(op) + ": " + switchProblem);
  gpuplan::PlanArgs a = m.args(input, bytes);
  a.switchWords = words;
  // No peer writes into an LL plan's output (only into its packets): it is
  // written in the caller's buffer itself, saving the copy at the end, unless
  // an out-of-place plan is handed one buffer as input and output.
  if (m.plan.ll() && (m.plan.inPlace || input != output)) {
    a.local[gpuplan::kOutput] = static_cast<char*>(output);
    if (m.plan.inPlace) a.local[gpuplan::kInput] = static_cast<char*>(output);
  }
  a.userOutput = output != a.local[gpuplan::kOutput] ? static_cast<char*>(output) : nullptr;
  // Chunks no peer touches are computed in the caller's output (no copy at
  // the end), unless it shares bytes with the input, which may still be read.
  const size_t outBytes = a.chunkBytes * m.plan.outputChunks;
  const auto in = reinterpret_cast<uintptr_t>(input), out = reinterpret_cast<uintptr_t>(output);
  const bool apart = out + outBytes <= in || in + bytes <= out;
  const bool switchAligned = m.switches.empty() || out % 16 == 0;  // see switchProblem
  a.local[gpuplan::kCallerOutput] =
      m.callerOutputChunks && a.userOutput && apart && switchAligned ? a.userOutput : a.local[gpuplan::kOutput];
  a.divisor = op == ReduceOp::Avg && m.reduces ? static_cast<uint32_t>(m.comm.size()) : 1;
  if (a.local[gpuplan::kInput] != input)
    PB_CUDA_CHECK(cudaMemcpyAsync(a.local[gpuplan::kInput], input, bytes, cudaMemcpyDefault, stream));
  if (!a.blocksHandshake) gpuplan::launchHandshake(a, stream);
  gpuplan::launchPlan(a, type, op, m.threads, stream);
}

}  // namespace plugboard
