// The host side of relayed GPU calls (gpu/collectives/host_relay.hpp): a
// thread that watches the relay's words, runs each posted call with a given
// function and reports it done. No CUDA here, so it builds (and its tests
// run under the sanitizers) without the GPU path: the words may live in any
// memory (tests use plain memory and a thread playing the kernel).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "gpu/collectives/relay_words.hpp"
#include "plugboard/error.hpp"

namespace plugboard::gpucoll {

/// Where a RelayServer finds its calls: the words, the data area and the
/// packet areas (relay_words.hpp), all outliving the server.
struct RelayArea {
  RelayWords* words = nullptr;
  char* data = nullptr;
  uint64_t capacity = 0;            ///< Bytes of data.
  uint64_t* inPackets = nullptr;    ///< kRelayInPackets
  uint64_t* outPackets = nullptr;   ///< kRelayOutPackets
};

/// Serves the calls posted in one RelayWords, in order, on its own thread.
/// The thread spins while calls are expected (announced within the last
/// kHintSpin: a kernel queued behind a long one is not spun for forever) or
/// one was served within the spin window, and otherwise sleeps, looking
/// again every idle poll (so a call posted by a replayed CUDA graph, which
/// no host call announced, is still found). A call comes either posted
/// (`posted`, `call`, data in the data area) or as packets; packets are
/// unpacked into the data area, run, and the result packed back. A run
/// function that throws, a malformed call, a call number out of sequence
/// or packets that do not all arrive within kPacketWait end the service:
/// the reason is kept (failure()), `failed` is set for the device, and the
/// thread ends.
class RelayServer {
 public:
  /// Runs one call on the data area in place; throws to fail the service.
  using RunFn = std::function<void(const RelayCall& call, char* data)>;

  /// Starts the thread. nranks bounds roots and sizes blocked calls; `who`
  /// prefixes every failure ("rank 0 (host a): GPU collectives' host relay").
  RelayServer(const RelayArea& area, int nranks, RunFn run, std::string who,
              std::chrono::microseconds spinWindow = std::chrono::microseconds(200),
              std::chrono::microseconds idlePoll = std::chrono::microseconds(250));
  /// Stops and joins the thread (a call being run finishes first), then
  /// logs (Info) the calls served, the mean time the host ran one and the
  /// mean time from one call's result to the next call's post (the device
  /// side: copy back, kernel end, next launch, copy in).
  ~RelayServer();
  RelayServer(const RelayServer&) = delete;
  RelayServer& operator=(const RelayServer&) = delete;

  /// A host call enqueued one more relayed kernel: spin until it is served
  /// (at most kHintSpin from now).
  void expectCall();
  /// How long an announced call keeps the thread spinning.
  static constexpr std::chrono::milliseconds kHintSpin{100};
  /// How long the packets of a call may take to arrive after its first.
  static constexpr std::chrono::milliseconds kPacketWait{1000};
  /// The service ended (cheap: GpuCollectives asks before every call).
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  /// Why the service ended ("" while it runs).
  std::string failure() const;
  /// The code of that failure: the run function's Error's, else Internal.
  ErrorCode failureCode() const;
  /// Calls served so far.
  uint64_t served() const { return served_.load(std::memory_order_acquire); }

 private:
  void loop();
  /// Serves the call numbered served_ + 1; false once the service failed.
  bool serve(uint64_t posted);
  /// Serves call `seq`, whose first packet has arrived; false once the service failed or stops.
  bool servePackets(uint64_t seq);
  /// The data words of in-packets [first, first + n) of call seq, once
  /// they have all arrived; false on stop or past the deadline (then the
  /// service has failed, naming the first missing packet).
  bool awaitPackets(uint64_t seq, uint64_t first, uint64_t n, std::chrono::steady_clock::time_point deadline,
                    uint32_t* words);
  /// Runs the checked call and reports it done (both ways of posting).
  bool runCall(uint64_t seq, const RelayCall& call);
  /// Marks call seq done: served, a hint consumed, `done` stored.
  void finish(uint64_t seq);
  void fail(const std::string& why, ErrorCode code = ErrorCode::Internal);
  /// Sleeps until expectCall, stop or the idle poll.
  void idle();
  /// Calls are announced and the last announcement is fresh.
  bool hinted() const;

  RelayWords* words_;
  char* data_;
  uint64_t capacity_;
  uint64_t* inPackets_;
  uint64_t* outPackets_;
  int nranks_;
  RunFn run_;
  std::string who_;
  std::chrono::microseconds spinWindow_, idlePoll_;
  std::atomic<uint64_t> served_{0};
  std::atomic<int64_t> hints_{0};      // calls the host enqueued and not yet served
  std::atomic<int64_t> lastHint_{0};  // steady_clock ticks of the last expectCall
  // Thread-only timing of back-to-back calls (a post seen within 1 ms of the last result).
  std::chrono::steady_clock::duration runTime_{}, deviceTime_{};
  uint64_t timedRuns_ = 0, timedGaps_ = 0;
  mutable std::mutex mu_;              // guards failure_, stop_ with cv_
  std::condition_variable cv_;
  std::string failure_;
  ErrorCode failureCode_ = ErrorCode::Internal;
  std::atomic<bool> failed_{false};  // set after failure_
  bool stop_ = false;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace plugboard::gpucoll
