// HostPlanExecutor: a rank's thread blocks run as cooperative tasks on the
// calling thread. Each steps through its operations until one must wait (a
// signal or packets not yet arrived); then the next task runs. Puts are
// writes on the pair's connection into the peer's registered buffer, signals
// and waits a Host2HostSemaphore per channel (a signal lands after every
// earlier write on its connection, so a wait orders the data of the puts
// before it).
//
// LL packets on host buffers: host transports deliver bytes, not 16-byte
// packets a reader can poll, so a put_packet is a write into the peer's
// packets buffer followed by +1 on the peer's flag word of each chunk
// written, and a reduce_packet waits until each of its chunks' flags reach
// this call's number. Every packets chunk is put once per call (the loader
// checks it) by one writer, in order, so flag >= k means call k's packets
// have landed.
//
// The start handshake keeps a rank's calls apart from its peers'. Plans
// that cannot run two calls ahead of a peer they write into (plans/
// call_overlap.hpp: LL plans with packets both ways, and plans whose puts
// each wait for their target's signal) run their small calls without it:
// what peers write (the packets; or the output and scratch) has a second
// region sized for calls of kOverlapInputBytes, and consecutive small calls
// alternate between the two by the call's parity, so a peer already in
// call k + 1 writes where this rank does not read. A call skips the
// handshake only when it and the call before are small (every rank
// decides alike: same calls, same sizes); a large call handshakes and uses
// the first region, so no peer reaches it while this rank is in the call
// before.
//
// get on host buffers: transports write, they do not read, so the chunk's
// owner serves each get. Both ends number the gets from the plan alone (the
// owner: every get reading it, by rank, thread block and position; the
// reader: its own, in its order). The reader adds 1 to the owner's request
// word of its get and waits for its served word to reach the call's
// number; the owner, between its own operations, writes each requested
// chunk into the reader's buffer and then adds 1 to the served word (it
// lands after the write), and ends its call only once it has served every
// get of the call. The plan orders a get after the owner's writes to the
// chunk and before its next ones (plugboard_dsl checks it), so the bytes
// served are the ones the reader asked for.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <thread>
#include <tuple>
#include <vector>

#include "collectives/reduce_kernels.hpp"
#include "plans/call_overlap.hpp"
#include "plans/output_homes.hpp"
#include "plans/plan_call.hpp"
#include "plugboard/error.hpp"
#include "plugboard/host_plan.hpp"

namespace plugboard {

namespace {
// input, output, scratch, packets, packet flags, get requests, gets served (below 2^30)
constexpr int kBufferTags[7] = {0x2d504c00, 0x2d504c01, 0x2d504c02, 0x2d504c03, 0x2d504c04, 0x2d504c05, 0x2d504c06};
constexpr size_t kBuffers = 4;  ///< Data buffers, as PlanChunk::Buffer; the flag words are registered after them.
constexpr size_t kFlags = 4;    ///< Index of the packet flags in local and remote.
constexpr size_t kGetRequests = 5;  ///< Index of the get request words (this rank as owner).
constexpr size_t kGetsServed = 6;   ///< Index of the served words (this rank as reader).
/// Least time between two calls of a whileWaiting check.
constexpr std::chrono::microseconds kWaitCheckEvery{200};
/// Calls of at most this much input may skip the start handshake (see the
/// top of the file). Larger ones handshake: a round trip is little beside
/// their transfer (2 ranks, allpairs, 4 MiB: two regions of that size
/// measured slower than one), and the second region stays small.
constexpr size_t kOverlapInputBytes = 256 * 1024;

}  // namespace

struct HostPlanExecutor::Impl {
  /// One channel of this rank: its connection, semaphore and the peer's buffers.
  struct Channel {
    int peer = 0;
    std::shared_ptr<Connection> connection;
    std::unique_ptr<Host2HostSemaphore> semaphore;
    uint64_t waited = 0;  // signals consumed by waits (the handshake's included)
  };

  /// A get some peer makes of this rank's memory, which this rank serves.
  struct ServedGet {
    size_t channel = 0;     // this rank's channel to the reader
    PlanChunk src, dst;     // src here, dst at the reader
    uint64_t readerIndex = 0;  // the get's served word at the reader
    bool doneThisCall = false;
  };
  /// One of this rank's own gets.
  struct OwnGet {
    uint64_t ownerIndex = 0;  // its request word at the owner
    uint64_t index = 0;       // its served word here
    bool requested = false;   // this call's request is out
  };

  Communicator& comm;
  Plan plan;
  size_t maxInputBytes;
  std::vector<std::vector<char>> storage = std::vector<std::vector<char>>(kBuffers);  // as PlanChunk::Buffer
  std::vector<uint64_t> packetFlags;  // per packets chunk: +1 by the put_packet of each call
  bool mayOverlap = false;            // small calls may skip the handshake (two regions, below)
  size_t secondRegion[kBuffers] = {};  // per storage slot: the second region's offset, 0 if none
  size_t region = 0;                  // this call's region: 0 or 1
  bool lastCallSmall = true;          // the call before (none yet counts) had at most kOverlapInputBytes
  uint64_t calls = 0;                 // runs so far, this one included
  std::vector<uint64_t> getRequests;  // per get of this rank's memory: +1 by its reader each call
  std::vector<uint64_t> getsServed;   // per own get: +1 by its owner each call, after the data
  std::vector<ServedGet> toServe;     // as getRequests
  std::map<const PlanOp*, OwnGet> ownGets;
  size_t servedThisCall = 0;
  std::vector<RegisteredMemory> local = std::vector<RegisteredMemory>(kBuffers + 3);  // buffers, then the flag words
  std::map<int, std::vector<RemoteMemory>> remote;  // peer -> its buffers and flags, as local
  std::vector<Channel> channels;                    // as the plan lists this rank's

  Impl(Communicator& c, Plan p, size_t maxBytes) : comm(c), plan(std::move(p)), maxInputBytes(maxBytes) {}

  const PlanRank& mine() const { return plan.ranks[comm.rank()]; }
  /// Storage slot of a plan buffer: in-place plans read their input from the output.
  size_t slot(PlanChunk::Buffer b) const {
    return b == PlanChunk::Buffer::Input && plan.inPlace ? 1 : static_cast<size_t>(b);
  }
  std::string who() const { return "rank " + std::to_string(comm.rank()) + " (plan " + plan.source + ")"; }

  void setup();
  /// Numbers the plan's gets (see the top of the file) and sizes their words.
  void numberGets();
  void connectAndExchange();
  /// This rank's own get o: asks once, then true when it has been served.
  bool get(const PlanOp& o);
  /// Serves every get of this call whose request has come; true if any.
  bool serveGets();
  void makeSemaphores();

  // run()
  size_t chunkBytes = 0;
  DataType type = DataType::Uint8;
  ReduceOp op = ReduceOp::Sum;
  std::vector<char> acc;  // reduce's accumulator, kept between operations (no allocation per op once grown)
  std::vector<uint32_t> barrierArrivals;  // this call: thread blocks that reached each barrier group
  std::vector<char> atBarrier;            // this call: the thread block has counted itself at its current barrier
  // Out-of-place calls whose input and output are apart: the input and
  // output chunks no transport moves live in the caller's buffers
  // (chunksInStorage), so they are not copied in or out.
  std::vector<bool> inputInStorage, outputInStorage;
  const char* callerInput = nullptr;  // this call's, or null: every chunk in the storage
  char* callerOutput = nullptr;
  /// Where this rank's own operations find chunk index of buffer b.
  char* at(PlanChunk::Buffer b, uint64_t index) {
    // Out of place, nothing writes the input (the loader refuses it).
    if (b == PlanChunk::Buffer::Input && callerInput && !inputInStorage[index])
      return const_cast<char*>(callerInput) + index * chunkBytes;
    if (b == PlanChunk::Buffer::Output && callerOutput && !outputInStorage[index]) return callerOutput + index * chunkBytes;
    return stored(slot(b)) + index * chunkBytes;
  }
  /// Offset of this call's region of storage slot s.
  size_t half(size_t s) const { return region * secondRegion[s]; }
  /// This call's region of storage slot s.
  char* stored(size_t s) { return storage[s].data() + half(s); }
  /// Copies the chunks flagged in `inStorage` between the caller's buffer
  /// and the storage's (toStorage: in; else out).
  void copyChunks(const std::vector<bool>& inStorage, char* caller, char* stored, bool toStorage) const;
  bool step(const PlanOp& o, size_t tb);
  /// dst = op over o.srcs, then (reduce_packet) o.packets.
  void reduce(const PlanOp& o);
  void putPacket(const PlanOp& o);
  bool packetsArrived(const std::vector<PlanChunk>& packets) const;
  /// run() less the failure report.
  void runOnce(const void* input, void* output, size_t count, DataType type, ReduceOp op);
  void runTasks();
  void handshake();
  /// "wait on channel 1 with rank 3 (host b) over ethernet: waiting for
  /// its signal 5, 4 received": an operation, for errors.
  std::string describeOp(const PlanOp& o) const;
  /// Runs the whileWaiting check when due; fails with the stuck thread
  /// blocks (pc: each one's next operation) once nothing moved for the timeout.
  void checkStuck(std::chrono::steady_clock::time_point lastMove, const std::vector<size_t>& pc);

  std::function<void()> waitCheck;  // whileWaiting's
  std::function<void(const Error&)> failureTeller;  // whenFailing's
  std::chrono::steady_clock::time_point lastWaitCheck;
};

void HostPlanExecutor::Impl::setup() {
  if (plan.nranks != comm.size())
    throw Error(ErrorCode::InvalidUsage, who() + ": the plan is for " + std::to_string(plan.nranks) +
                                             " ranks, the communicator has " + std::to_string(comm.size()));
  if (plan.hasSwitches())  // every rank holds the same plan, so every rank refuses alike
    throw Error(ErrorCode::InvalidUsage, who() + ": the plan has switch channels, which run on GPU buffers only "
                                                 "(GpuPlanExecutor); host buffers have no switch to reduce through");
  const uint64_t chunk = (maxInputBytes + plan.inputChunks - 1) / plan.inputChunks;
  const bool packetHalves = callsNeedNoHandshake(plan), dataHalves = putsHearFromTheirTarget(plan);
  mayOverlap = packetHalves || dataHalves;
  const uint64_t smallChunk = (std::min<uint64_t>(maxInputBytes, kOverlapInputBytes) + plan.inputChunks - 1) / plan.inputChunks;
  const uint64_t counts[kBuffers] = {plan.inputChunks, plan.outputChunks, plan.scratchChunks, plan.packetChunks};
  for (size_t b = 0; b < kBuffers; ++b) {
    const auto buffer = static_cast<PlanChunk::Buffer>(b);
    const bool two = buffer == PlanChunk::Buffer::Packets ? packetHalves : dataHalves && buffer != PlanChunk::Buffer::Input;
    secondRegion[b] = two ? counts[b] * chunk : 0;
    storage[b].assign(std::max<uint64_t>(counts[b] * (chunk + (two ? smallChunk : 0)), 1), 0);
    local[b] = comm.registerMemory(storage[b].data(), storage[b].size(), MemoryKind::Host);
  }
  inputInStorage = chunksInStorage(plan, comm.rank(), PlanChunk::Buffer::Input, true);
  outputInStorage = chunksInStorage(plan, comm.rank(), PlanChunk::Buffer::Output, true);
  packetFlags.assign(std::max<uint64_t>(plan.packetChunks, 1), 0);
  local[kFlags] = comm.registerMemory(packetFlags.data(), packetFlags.size() * sizeof(uint64_t), MemoryKind::Host);
  numberGets();
  local[kGetRequests] = comm.registerMemory(getRequests.data(), getRequests.size() * sizeof(uint64_t), MemoryKind::Host);
  local[kGetsServed] = comm.registerMemory(getsServed.data(), getsServed.size() * sizeof(uint64_t), MemoryKind::Host);
  connectAndExchange();
  makeSemaphores();
}

void HostPlanExecutor::Impl::numberGets() {
  const int me = comm.rank();
  std::map<int, uint64_t> ownerAt;  // owner -> gets of its memory numbered so far, in (reader, tb, op) order
  for (int r = 0; r < plan.nranks; ++r) {
    uint64_t readerIndex = 0;
    for (const auto& tb : plan.ranks[r].threadblocks)
      for (const auto& o : tb.ops) {
        if (o.kind != PlanOp::Kind::Get) continue;
        const PlanChannel& ch = plan.ranks[r].channels[o.channel];
        const uint64_t ownerIndex = ownerAt[ch.peer]++;
        if (r == me) ownGets[&o] = OwnGet{ownerIndex, readerIndex, false};
        if (ch.peer == me) {  // toServe[ownerIndex]
          size_t back = 0;  // this rank's channel to the reader (the loader checks that it exists)
          while (back < mine().channels.size() && !(mine().channels[back].peer == r && mine().channels[back].type == ch.type &&
                                                     mine().channels[back].tag == ch.tag))
            ++back;
          toServe.push_back(ServedGet{back, o.src, o.dst, readerIndex, false});
        }
        ++readerIndex;
      }
  }
  getRequests.assign(std::max<size_t>(toServe.size(), 1), 0);
  getsServed.assign(std::max<size_t>(ownGets.size(), 1), 0);
}

void HostPlanExecutor::Impl::connectAndExchange() {
  std::vector<int> peers;
  for (const auto& c : mine().channels)
    if (std::find(peers.begin(), peers.end(), c.peer) == peers.end()) peers.push_back(c.peer);
  std::sort(peers.begin(), peers.end());
  for (int p : peers) comm.connect(p, MemoryKind::Host);
  comm.setup();
  for (int p : peers)
    for (size_t b = 0; b < local.size(); ++b) comm.sendMemory(local[b], p, kBufferTags[b]);  // buffered: no order needed
  for (int p : peers)
    for (size_t b = 0; b < local.size(); ++b) remote[p].push_back(comm.recvMemory(p, kBufferTags[b]));
  for (const auto& c : mine().channels) channels.push_back(Channel{c.peer, comm.connection(c.peer, MemoryKind::Host), {}, 0});
}

// Semaphore set-up is a blocking exchange with the peer: every rank makes
// them in one global order of (lower rank, higher rank, type, tag), which
// both ends of a pair share, so no two ranks wait on each other in a cycle.
void HostPlanExecutor::Impl::makeSemaphores() {
  using Key = std::tuple<int, int, int, int64_t>;
  std::vector<std::pair<Key, size_t>> order;
  const int me = comm.rank();
  for (size_t i = 0; i < mine().channels.size(); ++i) {
    const PlanChannel& c = mine().channels[i];
    order.push_back({{std::min(me, c.peer), std::max(me, c.peer), static_cast<int>(c.type), c.tag}, i});
  }
  std::sort(order.begin(), order.end());
  for (const auto& [key, i] : order) channels[i].semaphore = std::make_unique<Host2HostSemaphore>(comm, channels[i].connection);
}

void HostPlanExecutor::Impl::reduce(const PlanOp& o) {
  const size_t bytes = o.dst.size * chunkBytes, count = bytes / dataTypeSize(type);
  const size_t n = o.srcs.size() + o.packets.size();
  const auto source = [&](size_t i) {
    const PlanChunk& c = i < o.srcs.size() ? o.srcs[i] : o.packets[i - o.srcs.size()];
    return at(c.buffer, c.index);
  };
  // dst may be one of the sources: accumulate in a copy when it is not the first.
  const char* first = source(0);
  acc.assign(first, first + bytes);
  for (size_t i = 1; i < n; ++i) reduceInto(acc.data(), source(i), count, type, op);
  std::memcpy(at(o.dst.buffer, o.dst.index), acc.data(), bytes);
}

void HostPlanExecutor::Impl::putPacket(const PlanOp& o) {
  Channel& c = channels[o.channel];
  const std::vector<RemoteMemory>& peer = remote.at(c.peer);
  const size_t packets = static_cast<size_t>(PlanChunk::Buffer::Packets);
  c.connection->write(peer[packets], half(packets) + o.dst.index * chunkBytes, local[slot(o.src.buffer)],
                      half(slot(o.src.buffer)) + o.src.index * chunkBytes, o.src.size * chunkBytes);
  for (uint64_t k = 0; k < o.dst.size; ++k) c.connection->signal(peer[kFlags], (o.dst.index + k) * sizeof(uint64_t), 1);
}

bool HostPlanExecutor::Impl::get(const PlanOp& o) {
  OwnGet& g = ownGets.at(&o);
  if (!g.requested) {
    Channel& c = channels[o.channel];
    c.connection->signal(remote.at(c.peer)[kGetRequests], g.ownerIndex * sizeof(uint64_t), 1);
    g.requested = true;
  }
  if (__atomic_load_n(&getsServed[g.index], __ATOMIC_ACQUIRE) < calls) return false;
  g.requested = false;
  return true;
}

bool HostPlanExecutor::Impl::serveGets() {
  bool served = false;
  for (size_t j = 0; j < toServe.size(); ++j) {
    ServedGet& g = toServe[j];
    if (g.doneThisCall || __atomic_load_n(&getRequests[j], __ATOMIC_ACQUIRE) < calls) continue;
    Channel& c = channels[g.channel];
    const std::vector<RemoteMemory>& reader = remote.at(c.peer);
    c.connection->write(reader[slot(g.dst.buffer)], half(slot(g.dst.buffer)) + g.dst.index * chunkBytes,
                        local[slot(g.src.buffer)], half(slot(g.src.buffer)) + g.src.index * chunkBytes,
                        g.src.size * chunkBytes);
    c.connection->signal(reader[kGetsServed], g.readerIndex * sizeof(uint64_t), 1);
    g.doneThisCall = true;
    ++servedThisCall;
    served = true;
  }
  return served;
}

bool HostPlanExecutor::Impl::packetsArrived(const std::vector<PlanChunk>& packets) const {
  for (const PlanChunk& c : packets)
    for (uint64_t i = c.index; i < c.index + c.size; ++i)
      if (__atomic_load_n(&packetFlags[i], __ATOMIC_ACQUIRE) < calls) return false;
  return true;
}

/// One operation of thread block tb (an index); false when it must wait
/// (a signal, packets or the rest of a barrier's group not there yet).
bool HostPlanExecutor::Impl::step(const PlanOp& o, size_t tb) {
  const size_t bytes = (o.kind == PlanOp::Kind::Reduce ? o.dst.size : o.src.size) * chunkBytes;
  switch (o.kind) {
    case PlanOp::Kind::Put: {
      Channel& c = channels[o.channel];
      c.connection->write(remote.at(c.peer)[slot(o.dst.buffer)], half(slot(o.dst.buffer)) + o.dst.index * chunkBytes,
                          local[slot(o.src.buffer)], half(slot(o.src.buffer)) + o.src.index * chunkBytes, bytes);
      return true;
    }
    case PlanOp::Kind::Signal: channels[o.channel].semaphore->signal(); return true;
    case PlanOp::Kind::Wait: {
      Channel& c = channels[o.channel];
      if (c.semaphore->inbound() <= c.waited) return false;
      ++c.waited;
      return true;
    }
    case PlanOp::Kind::Flush: channels[o.channel].connection->flush(); return true;
    case PlanOp::Kind::Copy: std::memmove(at(o.dst.buffer, o.dst.index), at(o.src.buffer, o.src.index), bytes); return true;
    case PlanOp::Kind::Reduce: reduce(o); return true;
    case PlanOp::Kind::PutPacket: putPacket(o); return true;
    case PlanOp::Kind::ReducePacket:
      if (!packetsArrived(o.packets)) return false;
      reduce(o);
      return true;
    case PlanOp::Kind::Get: return get(o);
    case PlanOp::Kind::Barrier:
      if (!atBarrier[tb]) atBarrier[tb] = 1, ++barrierArrivals[static_cast<size_t>(o.barrier)];
      if (barrierArrivals[static_cast<size_t>(o.barrier)] < o.parties) return false;
      atBarrier[tb] = 0;
      return true;
    case PlanOp::Kind::SwitchReduce:
    case PlanOp::Kind::SwitchBroadcast: break;  // setup() refuses such plans
  }
  return true;
}

void HostPlanExecutor::Impl::runTasks() {
  const auto& tbs = mine().threadblocks;
  std::vector<size_t> pc(tbs.size(), 0);
  barrierArrivals.assign(static_cast<size_t>(mine().barriers), 0);
  atBarrier.assign(tbs.size(), 0);
  servedThisCall = 0;
  for (auto& g : toServe) g.doneThisCall = false;
  auto lastMove = std::chrono::steady_clock::now();
  for (;;) {
    bool moved = serveGets(), left = servedThisCall < toServe.size();
    for (size_t t = 0; t < tbs.size(); ++t) {
      while (pc[t] < tbs[t].ops.size() && step(tbs[t].ops[pc[t]], t)) ++pc[t], moved = true;
      left = left || pc[t] < tbs[t].ops.size();
    }
    if (!left) return;
    if (moved) {
      lastMove = std::chrono::steady_clock::now();
      continue;
    }
    for (auto& c : channels) c.connection->progress();
    checkStuck(lastMove, pc);
    std::this_thread::yield();
  }
}

std::string HostPlanExecutor::Impl::describeOp(const PlanOp& o) const {
  std::string text = planOpName(o.kind);
  if (o.channel < 0 || size_t(o.channel) >= channels.size()) return text;
  const Channel& c = channels[o.channel];
  text += " on channel " + std::to_string(o.channel) + " with rank " + std::to_string(c.peer) + " (host " +
          comm.hostOf(c.peer) + ") over " + c.connection->transport();
  if (o.kind == PlanOp::Kind::Wait)
    text += ": waiting for its signal " + std::to_string(c.waited + 1) + ", " +
            std::to_string(c.semaphore->inbound()) + " received";
  return text;
}

void HostPlanExecutor::Impl::checkStuck(std::chrono::steady_clock::time_point lastMove,
                                        const std::vector<size_t>& pc) {
  comm.checkErrors();
  const auto now = std::chrono::steady_clock::now();
  if (waitCheck && now - lastWaitCheck >= kWaitCheckEvery) {
    lastWaitCheck = now;
    waitCheck();
  }
  const auto timeout = comm.defaultTimeout();
  if (now - lastMove <= timeout) return;
  const auto& tbs = mine().threadblocks;
  std::string stuck;
  for (size_t t = 0; t < tbs.size() && t < pc.size(); ++t)
    if (pc[t] < tbs[t].ops.size())
      stuck += " thread block " + std::to_string(tbs[t].id) + " at operation " + std::to_string(pc[t]) + " (" +
               describeOp(tbs[t].ops[pc[t]]) + ");";
  for (const ServedGet& g : toServe)
    if (!pc.empty() && !g.doneThisCall)
      stuck += " a get by rank " + std::to_string(channels[g.channel].peer) + " (its request has not come);";
  throw Error(ErrorCode::Timeout, who() + " made no progress for " + std::to_string(timeout.count()) + " ms; waiting for " +
                                      (pc.empty() ? std::string("its peers' start signals") : "a signal, packets, a get or a barrier in:" + stuck));
}

// Every channel signals once and waits once before any operation: a peer
// puts into this rank's buffers only after this rank has taken its input
// (and copied out the previous call's output).
void HostPlanExecutor::Impl::handshake() {
  for (auto& c : channels) c.semaphore->signal();
  const auto start = std::chrono::steady_clock::now();
  for (auto& c : channels) {
    while (c.semaphore->inbound() <= c.waited) {
      c.connection->progress();
      checkStuck(start, {});
      std::this_thread::yield();
    }
    ++c.waited;
  }
}

HostPlanExecutor::HostPlanExecutor(Communicator& comm, Plan plan, size_t maxInputBytes)
    : impl_(std::make_unique<Impl>(comm, std::move(plan), maxInputBytes)) {
  impl_->setup();
}

HostPlanExecutor::~HostPlanExecutor() = default;

const Plan& HostPlanExecutor::plan() const { return impl_->plan; }

void HostPlanExecutor::whileWaiting(std::function<void()> check) { impl_->waitCheck = std::move(check); }

void HostPlanExecutor::whenFailing(std::function<void(const Error&)> tell) { impl_->failureTeller = std::move(tell); }

void HostPlanExecutor::run(const void* input, void* output, size_t count, DataType type, ReduceOp op) {
  try {
    impl_->runOnce(input, output, count, type, op);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Aborted) throw;
    if (impl_->failureTeller) impl_->failureTeller(e);
    else impl_->comm.reportFailure(e.what());
    throw;
  }
}

void HostPlanExecutor::Impl::runOnce(const void* input, void* output, size_t count, DataType callType,
                                     ReduceOp callOp) {
  const size_t es = dataTypeSize(callType);
  const size_t bytes = checkPlanCall(plan, who(), count, callType, maxInputBytes, input, output);
  chunkBytes = bytes / plan.inputChunks;
  type = callType;
  op = callOp;
  const size_t outBytes = plan.outputChunks * chunkBytes;
  const auto in = reinterpret_cast<uintptr_t>(input), out = reinterpret_cast<uintptr_t>(output);
  const bool apart = !plan.inPlace && (out + outBytes <= in || in + bytes <= out);
  ++calls;
  const bool small = bytes <= kOverlapInputBytes;
  const bool overlapping = mayOverlap && small && lastCallSmall;
  lastCallSmall = small;
  region = small && mayOverlap ? calls % 2 : 0;
  callerInput = apart ? static_cast<const char*>(input) : nullptr;
  callerOutput = apart ? static_cast<char*>(output) : nullptr;
  // In place, the input is the output buffer (the plan writes into it).
  if (apart) copyChunks(inputInStorage, const_cast<char*>(callerInput), stored(0), true);
  else if (bytes) std::memcpy(stored(plan.inPlace ? 1 : 0), input, bytes);
  if (!overlapping) handshake();
  runTasks();
  for (auto& c : channels) c.connection->flush();  // this rank's puts have landed before their sources change
  if (apart) copyChunks(outputInStorage, callerOutput, stored(1), false);
  else if (outBytes) std::memcpy(output, stored(1), outBytes);
  callerInput = nullptr;
  callerOutput = nullptr;
  finishAverage(output, outBytes / es, type, op, comm.size());
}

void HostPlanExecutor::Impl::copyChunks(const std::vector<bool>& inStorage, char* caller, char* stored,
                                        bool toStorage) const {
  for (size_t k = 0; k < inStorage.size(); ++k) {
    if (!inStorage[k] || chunkBytes == 0) continue;
    char* c = caller + k * chunkBytes;
    char* s = stored + k * chunkBytes;
    std::memcpy(toStorage ? s : c, toStorage ? c : s, chunkBytes);
  }
}

}  // namespace plugboard
