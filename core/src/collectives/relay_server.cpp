#include "collectives/relay_server.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>

#include "gpu/collectives/device_ctx.hpp"
#include "plugboard/datatype.hpp"
#include "plugboard/logger.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#define PB_RELAY_PAUSE() _mm_pause()
#else
#define PB_RELAY_PAUSE() std::atomic_signal_fence(std::memory_order_seq_cst)
#endif

namespace plugboard::gpucoll {
namespace {

/// What is wrong with a posted call, or "" (the device wrote it; a bad one
/// means corrupted shared memory or mismatched library builds).
std::string checkCall(const RelayCall& c, uint64_t capacity, int nranks) {
  const auto coll = static_cast<Coll>(c.coll);
  const bool blocked = coll == Coll::AllGather || coll == Coll::ReduceScatter || coll == Coll::AllToAll;
  const bool rooted = coll == Coll::Reduce || coll == Coll::Broadcast;
  const bool p2p = coll == Coll::Send || coll == Coll::Recv || coll == Coll::SendRecv;
  if (!blocked && !rooted && !p2p && coll != Coll::AllReduce)
    return "collective " + std::to_string(c.coll) + " is not relayed";
  if (c.type > static_cast<uint32_t>(DataType::Float8E5M2)) return "data type " + std::to_string(c.type) + " is unknown";
  if (c.op > static_cast<uint32_t>(ReduceOp::Avg)) return "reduce op " + std::to_string(c.op) + " is unknown";
  auto outOfRange = [nranks](const char* what, int r) {
    return std::string(what) + " " + std::to_string(r) + " is out of range [0, " + std::to_string(nranks) + ")";
  };
  if ((rooted || p2p) && (c.root < 0 || c.root >= nranks)) return outOfRange(p2p ? "peer" : "root", c.root);
  if (coll == Coll::SendRecv && (c.recvPeer < 0 || c.recvPeer >= nranks)) return outOfRange("recv peer", c.recvPeer);
  const uint64_t size = dataTypeSize(static_cast<DataType>(c.type)) * (blocked ? static_cast<uint64_t>(nranks) : 1);
  const uint64_t count = coll == Coll::SendRecv ? std::max(c.count, c.recvCount) : c.count;
  if (count > capacity / size)
    return std::to_string(count) + " elements" + (blocked ? " per rank block" : "") + " of " +
           std::to_string(dataTypeSize(static_cast<DataType>(c.type))) + " bytes exceed the " +
           std::to_string(capacity) + "-byte relay area";
  return "";
}

}  // namespace

RelayServer::RelayServer(const RelayArea& area, int nranks, RunFn run, std::string who,
                         std::chrono::microseconds spinWindow, std::chrono::microseconds idlePoll)
    : words_(area.words), data_(area.data), capacity_(area.capacity), inPackets_(area.inPackets),
      outPackets_(area.outPackets), nranks_(nranks), run_(std::move(run)), who_(std::move(who)),
      spinWindow_(spinWindow), idlePoll_(idlePoll) {
  served_.store(__atomic_load_n(&words_->done, __ATOMIC_ACQUIRE), std::memory_order_relaxed);
  thread_ = std::thread([this] { loop(); });
}

RelayServer::~RelayServer() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  stopping_.store(true, std::memory_order_release);
  cv_.notify_all();
  thread_.join();
  if (!timedRuns_) return;
  using us = std::chrono::duration<double, std::micro>;
  PB_LOG(Info, "COLL", who_ << ": served " << served() << " calls; the host collective took "
                            << us(runTime_).count() / timedRuns_ << " us on average; back to back, "
                            << (timedGaps_ ? us(deviceTime_).count() / timedGaps_ : 0.0)
                            << " us passed from one result to the next post");
}

void RelayServer::expectCall() {
  lastHint_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  hints_.fetch_add(1, std::memory_order_acq_rel);
  { std::lock_guard<std::mutex> g(mu_); }  // a sleeper either sees the count or is already waiting
  cv_.notify_one();
}

std::string RelayServer::failure() const {
  std::lock_guard<std::mutex> g(mu_);
  return failure_;
}

ErrorCode RelayServer::failureCode() const {
  std::lock_guard<std::mutex> g(mu_);
  return failureCode_;
}

void RelayServer::loop() {
  auto lastServed = std::chrono::steady_clock::now();
  bool servedAny = false;
  while (!stopping_.load(std::memory_order_acquire)) {
    const uint64_t posted = __atomic_load_n(&words_->posted, __ATOMIC_ACQUIRE);  // the call and data before it
    const uint64_t next = served_.load(std::memory_order_relaxed) + 1;
    const bool packets = (__atomic_load_n(&inPackets_[0], __ATOMIC_ACQUIRE) >> 32) == relayFlag(next);
    // A posted call raises `posted` to its number; a call sent as packets
    // leaves it behind (so only a `posted` above what was served is new).
    if (posted >= next || packets) {
      const auto seen = std::chrono::steady_clock::now();
      if (servedAny && seen - lastServed < std::chrono::milliseconds(1)) {
        deviceTime_ += seen - lastServed;
        ++timedGaps_;
      }
      if (!(packets ? servePackets(next) : serve(posted))) return;
      lastServed = std::chrono::steady_clock::now();
      runTime_ += lastServed - seen;
      ++timedRuns_;
      servedAny = true;
      continue;
    }
    if (hinted() || std::chrono::steady_clock::now() - lastServed < spinWindow_) {
      PB_RELAY_PAUSE();
      continue;
    }
    idle();
  }
}

bool RelayServer::hinted() const {
  if (hints_.load(std::memory_order_acquire) <= 0) return false;
  const std::chrono::steady_clock::duration since(std::chrono::steady_clock::now().time_since_epoch().count() -
                                                  lastHint_.load(std::memory_order_relaxed));
  return since < kHintSpin;
}

void RelayServer::idle() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, idlePoll_, [&] {
    return stop_ || hinted();
  });
}

bool RelayServer::serve(uint64_t posted) {
  const uint64_t next = served_.load(std::memory_order_relaxed) + 1;
  if (posted != next) {
    fail("the device posted call " + std::to_string(posted) + " where call " + std::to_string(next) +
         " was due (the relay's shared memory was overwritten?)");
    return false;
  }
  RelayCall call;
  call.count = words_->call.count;
  call.type = words_->call.type;
  call.op = words_->call.op;
  call.coll = words_->call.coll;
  call.root = words_->call.root;
  call.recvCount = words_->call.recvCount;
  call.recvPeer = words_->call.recvPeer;
  if (!runCall(posted, call)) return false;
  finish(posted);
  return true;
}

bool RelayServer::runCall(uint64_t seq, const RelayCall& call) {
  const std::string bad = checkCall(call, capacity_, nranks_);
  if (!bad.empty()) {
    fail("call " + std::to_string(seq) + ": " + bad);
    return false;
  }
  try {
    run_(call, data_);
  } catch (const Error& e) {
    fail("call " + std::to_string(seq) + " failed: " + e.what(), e.code());
    return false;
  } catch (const std::exception& e) {
    fail("call " + std::to_string(seq) + " failed: " + e.what());
    return false;
  }
  return true;
}

void RelayServer::finish(uint64_t seq) {
  served_.store(seq, std::memory_order_release);
  // A call a replayed graph posted consumes some other call's hint: that
  // one is then found by the spin window or the idle poll.
  for (int64_t h = hints_.load(std::memory_order_relaxed); h > 0 && !hints_.compare_exchange_weak(h, h - 1);) {
  }
  __atomic_store_n(&words_->done, seq, __ATOMIC_RELEASE);  // the result before `done`
}

bool RelayServer::awaitPackets(uint64_t seq, uint64_t first, uint64_t n,
                               std::chrono::steady_clock::time_point deadline, uint32_t* words) {
  const uint32_t flag = relayFlag(seq);
  uint64_t have = 0;  // packets [first, first + have) have arrived
  for (uint32_t spins = 0;; ++spins) {
    // One pass over what is left, without stopping at each packet: the
    // lines come from the device, and loads kept in flight together cost
    // one memory latency, not one each.
    while (have < n) {
      const uint64_t p = __atomic_load_n(&inPackets_[first + have], __ATOMIC_ACQUIRE);  // data and flag: one load
      if (p >> 32 != flag) break;
      words[have++] = static_cast<uint32_t>(p);
    }
    if (have == n) return true;
    if ((spins & 1023) != 1023) {
      PB_RELAY_PAUSE();
      continue;
    }
    if (stopping_.load(std::memory_order_acquire)) return false;
    if (std::chrono::steady_clock::now() > deadline) {
      fail("call " + std::to_string(seq) + ": packet " + std::to_string(first + have) +
           " of its input did not arrive within " + std::to_string(kPacketWait.count()) +
           " ms of the first (the relay's shared memory was overwritten?)");
      return false;
    }
  }
}

bool RelayServer::servePackets(uint64_t seq) {
  const auto deadline = std::chrono::steady_clock::now() + kPacketWait;
  uint32_t words[kRelayInPackets];
  if (!awaitPackets(seq, 0, kRelayHeaderPackets, deadline, words)) return false;
  const RelayHeader h = RelayHeader::read(words);
  const auto within = [&](uint64_t offset, uint64_t bytes) {
    return bytes <= kRelayPacketBytes && offset <= capacity_ && bytes <= capacity_ - offset;
  };
  if (!within(h.inOffset, h.inBytes) || !within(h.outOffset, h.outBytes)) {
    fail("call " + std::to_string(seq) + ": packets of " + std::to_string(h.inBytes) + " bytes in at " +
         std::to_string(h.inOffset) + " and " + std::to_string(h.outBytes) + " out at " + std::to_string(h.outOffset) +
         " do not fit the " + std::to_string(capacity_) + "-byte relay area or the " +
         std::to_string(kRelayPacketBytes) + "-byte packet limit");
    return false;
  }
  if (!awaitPackets(seq, kRelayHeaderPackets, (h.inBytes + 3) / 4, deadline, words)) return false;
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the kernel packs byte b of a word at bits 8b");
  std::memcpy(data_ + h.inOffset, words, h.inBytes);
  if (!runCall(seq, h.call)) return false;
  const uint32_t flag = relayFlag(seq);
  for (uint64_t i = 0; i == 0 || 4 * i < h.outBytes; ++i) {  // one packet at least: "done"
    uint32_t w = 0;
    if (4 * i < h.outBytes) std::memcpy(&w, data_ + h.outOffset + 4 * i, std::min<uint64_t>(4, h.outBytes - 4 * i));
    __atomic_store_n(&outPackets_[i], relayPacket(w, flag), __ATOMIC_RELEASE);
  }
  finish(seq);
  return true;
}

void RelayServer::fail(const std::string& why, ErrorCode code) {
  {
    std::lock_guard<std::mutex> g(mu_);
    failure_ = who_ + ": " + why;
    failureCode_ = code;
  }
  failed_.store(true, std::memory_order_release);
  __atomic_store_n(&words_->failed, 1u, __ATOMIC_RELEASE);
  PB_LOG(Warn, "COLL", who_ << ": " << why);
}

}  // namespace plugboard::gpucoll
