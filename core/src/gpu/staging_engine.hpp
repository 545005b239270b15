// The CUDA staging engine behind Stager (see communicator/stager.hpp).
//
// Layout: each side has `slots` send slots and `slots` landing slots of
// kSlotHeaderBytes + chunk bytes in pinned host memory, plus a control block
// whose word 0 counts slots the peer filled (arrivals) and word 1 counts
// landing slots the peer drained (credits).
//
// Sender (caller's thread, one op at a time): copy a chunk device->send
// slot on its own stream, then post one transport write of header+payload
// into the peer's landing slot fused with +1 on the peer's arrivals. Up to
// `slots` copies run ahead of the wire. A send slot is reused only after the
// transport completed the write from it; a landing slot only after the
// peer's credit for it.
//
// Receiver (one thread): takes arrivals in order, copies each payload to
// the target region on its own stream, and applies signals on that stream
// after the copies (a stream memory write for device counters,
// staged_counter.hpp; a host function for host counters), then returns
// credits as copies finish.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "communicator/communicator_impl.hpp"
#include "communicator/staging_header.hpp"
#include "communicator/stager.hpp"
#include "gpu/staged_counter.hpp"

namespace plugboard {

/// Pinned host memory, freed on destruction.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  /// Start of the buffer.
  char* data() const { return data_; }
  /// Allocates bytes of zeroed pinned host memory (frees any earlier block).
  void allocate(size_t bytes);
  /// Frees now (idempotent).
  void reset();

 private:
  char* data_ = nullptr;
};

/// Adds the time from construction to destruction to a total (nanoseconds).
class TimeInto {
 public:
  explicit TimeInto(std::atomic<uint64_t>& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~TimeInto() {
    total_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count(),
                     std::memory_order_relaxed);
  }
  TimeInto(const TimeInto&) = delete;
  TimeInto& operator=(const TimeInto&) = delete;

 private:
  std::atomic<uint64_t>& total_;
  std::chrono::steady_clock::time_point start_;
};

/// Where a staging engine's threads spent their time (nanoseconds), for describeState().
struct StagingTimes {
  std::atomic<uint64_t> waitSendSlot{0};  ///< sender: for the transport to finish with a send slot
  std::atomic<uint64_t> waitCredit{0};    ///< sender: for the peer to drain a landing slot
  std::atomic<uint64_t> copyOut{0};       ///< sender: device -> send slot copies, waited for
  std::atomic<uint64_t> post{0};          ///< sender: posting on the transport
  std::atomic<uint64_t> landed{0};        ///< receiver: arrival taken -> its GPU copy or signal done, summed
};

/// One connection's staging engine.
class StagingEngine final : public Stager {
 public:
  /// Collective with the peer: allocates and registers the slots,
  /// exchanges their descriptors over the bootstrap, starts the receiver.
  StagingEngine(Communicator::Impl& comm, ConnectionImpl& conn);
  ~StagingEngine() override;

  void write(const RemoteMemoryImpl& dst, uint64_t dstOffset, const void* src, uint64_t size) override;
  void signal(const RemoteMemoryImpl& dst, uint64_t dstOffset, uint64_t value) override;
  bool ordersSignals() const override { return ordersSignals_.load(std::memory_order_acquire); }
  void stop() override;
  std::string describeState() const override;

 private:
  struct InFlight {
    uint32_t sendSlot, landingSlot;
    uint64_t offset, bytes;
  };

  void allocate();
  void exchange();
  char* sendSlot(uint32_t i) const { return sendRing_.data() + i * stride_; }
  char* landingSlot(uint32_t i) const { return landingRing_.data() + i * stride_; }
  uint64_t* control() const { return reinterpret_cast<uint64_t*>(control_.data()); }

  // Sender side (under sendMutex_).
  uint32_t acquireSendSlot();
  uint32_t reserveLandingSlot();
  void issueCopy(InFlight& f, const RemoteMemoryImpl& dst, uint64_t dstOffset, const char* src);
  void post(const InFlight& f, const RemoteMemoryImpl& dst, uint64_t dstOffset);
  template <typename Ready>
  void waitFor(Ready ready, const char* what);

  /// Records the exception in flight as the connection's error.
  void failConnection();

  // Receiver side (its thread only).
  void receiveLoop();
  bool takeArrivals();
  bool retireLanded();
  void apply(const StagingSlotHeader& h, uint32_t slot);

  Communicator::Impl& comm_;
  ConnectionImpl& conn_;
  uint64_t chunk_ = 0, stride_ = 0;
  uint32_t slots_ = 0;
  int device_ = 0;
  cudaStream_t sendStream_ = nullptr, receiveStream_ = nullptr;
  std::vector<cudaEvent_t> sendEvents_, landedEvents_;
  PinnedBuffer sendRing_, landingRing_, control_;
  std::shared_ptr<RegisteredMemoryImpl> sendReg_, landingReg_, controlReg_;
  std::shared_ptr<RemoteMemoryImpl> peerLanding_, peerControl_;

  std::mutex sendMutex_;
  std::vector<uint64_t> postIndex_;  // per send slot: posted count of its last transport op
  // Written under sendMutex_; atomic so that describeState() may read them.
  std::atomic<uint64_t> sendSeq_{0}, landingSeq_{0};
  std::atomic<bool> ordersSignals_{false};

  StagingTimes times_;
  std::vector<std::chrono::steady_clock::time_point> takenAt_;  // per landing slot: when the receiver took it
  std::deque<uint32_t> landed_;  // landing slots copied or queued, oldest first
  // Receiver thread's; atomic so that describeState() may read them.
  std::atomic<uint64_t> taken_{0}, retired_{0};
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
  std::unique_ptr<StagedCounterWriter> counters_;  // receiver side
  std::thread receiver_;
};

/// Makes the one-thread "add to a device counter" kernel resident now, so
/// launching it later never waits on lazy module loading behind a running
/// kernel (which can be the very kernel waiting for the signal).
void preloadStagingKernels();
/// Enqueues counter += value (device memory, system-scope atomic) on stream.
void launchStagedAdd(uint64_t* counter, uint64_t value, cudaStream_t stream);

}  // namespace plugboard
