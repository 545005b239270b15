// StagingEngine: set-up, the sender side, and shutdown.
#include "gpu/staging_engine.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "communicator/wait.hpp"
#include "communicator/wire.hpp"
#include "gpu/cuda_check.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

constexpr uint64_t kSlotHeaderBytes = sizeof(StagingSlotHeader);

/// Reads and checks the staging settings; throws Error(Config).
void readSettings(const Config& config, uint64_t& chunk, uint32_t& slots) {
  const int64_t c = config.getInt("staging_chunk_bytes");
  const int64_t s = config.getInt("staging_slots");
  if (c < 4096 || c > (int64_t(1) << 30) || c % 64 != 0)
    throw Error(ErrorCode::Config, "staging_chunk_bytes must be a multiple of 64 between 4096 and 1 GiB, got " +
                                       std::to_string(c));
  if (s < 1 || s > 64) throw Error(ErrorCode::Config, "staging_slots must be between 1 and 64, got " + std::to_string(s));
  chunk = static_cast<uint64_t>(c);
  slots = static_cast<uint32_t>(s);
}

/// A time total as "12.3 ms".
std::string msText(const std::atomic<uint64_t>& ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f ms", double(ns.load(std::memory_order_relaxed)) / 1e6);
  return text;
}

}  // namespace

void PinnedBuffer::allocate(size_t bytes) {
  reset();
  PB_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&data_), bytes, cudaHostAllocPortable));
  std::memset(data_, 0, bytes);
}

PinnedBuffer::~PinnedBuffer() { reset(); }

void PinnedBuffer::reset() {
  if (data_) cudaFreeHost(data_);
  data_ = nullptr;
}

StagingEngine::StagingEngine(Communicator::Impl& comm, ConnectionImpl& conn) : comm_(comm), conn_(conn) {
  readSettings(*comm.config, chunk_, slots_);
  stride_ = kSlotHeaderBytes + chunk_;
  allocate();
  exchange();
  postIndex_.assign(slots_, 0);
  takenAt_.assign(slots_, {});
  receiver_ = std::thread([this] { receiveLoop(); });
  PB_LOG(Info, "NET", conn_.describe() << ": staging CUDA memory through " << slots_ << " pinned slots of "
                                       << chunk_ << " bytes each way");
}

StagingEngine::~StagingEngine() {
  try {
    stop();
  } catch (const std::exception& e) {
    PB_LOG(Warn, "NET", conn_.describe() << ": stopping the staging engine: " << e.what());
  }
}

void StagingEngine::allocate() {
  PB_CUDA_CHECK(cudaGetDevice(&device_));
  counters_ = std::make_unique<StagedCounterWriter>();
  PB_CUDA_CHECK(cudaStreamCreateWithFlags(&sendStream_, cudaStreamNonBlocking));
  PB_CUDA_CHECK(cudaStreamCreateWithFlags(&receiveStream_, cudaStreamNonBlocking));
  sendEvents_.assign(slots_, nullptr);
  landedEvents_.assign(slots_, nullptr);
  for (uint32_t i = 0; i < slots_; ++i) {
    PB_CUDA_CHECK(cudaEventCreateWithFlags(&sendEvents_[i], cudaEventDisableTiming));
    PB_CUDA_CHECK(cudaEventCreateWithFlags(&landedEvents_[i], cudaEventDisableTiming));
  }
  const size_t ringBytes = size_t(slots_) * stride_;
  sendRing_.allocate(ringBytes);
  landingRing_.allocate(ringBytes);
  control_.allocate(64);
  sendReg_ = comm_.registerRegion(sendRing_.data(), ringBytes, MemoryKind::Host);
  landingReg_ = comm_.registerRegion(landingRing_.data(), ringBytes, MemoryKind::Host);
  controlReg_ = comm_.registerRegion(control_.data(), 64, MemoryKind::Host);
  if (!sendReg_->handleFor(conn_.plugin))
    throw Error(ErrorCode::Internal, conn_.describe() + ": staging slots are not registered with " + conn_.plugin->name());
}

void StagingEngine::exchange() {
  BlobWriter w;
  std::vector<char> landing = comm_.describeMemory(*landingReg_), control = comm_.describeMemory(*controlReg_);
  w.u64(chunk_);
  w.u64(slots_);
  w.bytes(landing.data(), landing.size());
  w.bytes(control.data(), control.size());
  comm_.bootstrap->send(w.data().data(), w.data().size(), conn_.peer, kTagStaging);
  std::vector<char> blob = comm_.bootstrap->recv(conn_.peer, kTagStaging);
  BlobReader r(blob, "rank " + std::to_string(conn_.peer));
  const uint64_t peerChunk = r.u64(), peerSlots = r.u64();
  if (peerChunk != chunk_ || peerSlots != slots_)
    throw Error(ErrorCode::Config, conn_.describe() + ": staging settings differ (this rank " + std::to_string(slots_) +
                                       " x " + std::to_string(chunk_) + " bytes, peer " + std::to_string(peerSlots) + " x " +
                                       std::to_string(peerChunk) + ")");
  peerLanding_ = comm_.importMemory(r.bytes(), conn_.peer, std::shared_ptr<ConnectionImpl>(&conn_, [](ConnectionImpl*) {}));
  peerControl_ = comm_.importMemory(r.bytes(), conn_.peer, std::shared_ptr<ConnectionImpl>(&conn_, [](ConnectionImpl*) {}));
}

template <typename Ready>
void StagingEngine::waitFor(Ready ready, const char* what) {
  Backoff backoff(conn_.timeout, (conn_.plugin->properties().flags & PB_CAP_SIGNAL_NOTIFY) != 0);
  for (backoff.arm(); !ready(); backoff.arm()) {
    conn_.progress();
    conn_.throwIfFailed();
    if (ready()) return;
    if (backoff.expired())
      throw Error(ErrorCode::Timeout, conn_.describe() + ": staging timed out after " + backoff.elapsedText() +
                                          " waiting for " + what);
    backoff.pause();
  }
}

uint32_t StagingEngine::acquireSendSlot() {
  const uint32_t slot = static_cast<uint32_t>(sendSeq_ % slots_);
  const uint64_t needed = postIndex_[slot];
  TimeInto timed(times_.waitSendSlot);
  waitFor([&] { return conn_.completed.load(std::memory_order_acquire) >= needed; },
          "the transport to finish sending from a staging slot");
  ++sendSeq_;
  return slot;
}

uint32_t StagingEngine::reserveLandingSlot() {
  TimeInto timed(times_.waitCredit);
  waitFor([&] { return landingSeq_ - __atomic_load_n(&control()[1], __ATOMIC_ACQUIRE) < slots_; },
          "the peer to drain a landing slot (is its receive thread alive?)");
  return static_cast<uint32_t>(landingSeq_++ % slots_);
}

void StagingEngine::issueCopy(InFlight& f, const RemoteMemoryImpl& dst, uint64_t dstOffset, const char* src) {
  if (dst.staged) {
    f.landingSlot = reserveLandingSlot();
    StagingSlotHeader h{kStagingMagic, kStagedWrite, landingSeq_ - 1, dst.regionId, dstOffset + f.offset, f.bytes, 0, {0, 0}};
    std::memcpy(sendSlot(f.sendSlot), &h, sizeof h);
  }
  PB_CUDA_CHECK(cudaMemcpyAsync(sendSlot(f.sendSlot) + kSlotHeaderBytes, src + f.offset, f.bytes, cudaMemcpyDefault,
                                sendStream_));
  PB_CUDA_CHECK(cudaEventRecord(sendEvents_[f.sendSlot], sendStream_));
}

void StagingEngine::post(const InFlight& f, const RemoteMemoryImpl& dst, uint64_t dstOffset) {
  {
    TimeInto timed(times_.copyOut);
    PB_CUDA_CHECK(cudaEventSynchronize(sendEvents_[f.sendSlot]));
  }
  TimeInto timed(times_.post);
  pb_mr* mr = sendReg_->handleFor(conn_.plugin);
  const uint64_t from = f.sendSlot * stride_;
  if (dst.staged)
    postIndex_[f.sendSlot] = conn_.postWriteSignal(mr, from, peerLanding_->rkey, f.landingSlot * stride_,
                                                   kSlotHeaderBytes + f.bytes, peerControl_->rkey, 0, 1);
  else  // the destination is host memory the transport reaches: only this side stages
    postIndex_[f.sendSlot] = conn_.postWrite(mr, from + kSlotHeaderBytes, dst.rkey, dstOffset + f.offset, f.bytes);
}

void StagingEngine::write(const RemoteMemoryImpl& dst, uint64_t dstOffset, const void* src, uint64_t size) {
  std::lock_guard<std::mutex> lock(sendMutex_);
  if (stopped_) throw Error(ErrorCode::InvalidUsage, conn_.describe() + " is closed (its communicator was destroyed)");
  try {
    std::deque<InFlight> queue;
    uint64_t issued = 0;
    while (issued < size || !queue.empty()) {
      while (issued < size && queue.size() < slots_) {  // copies run up to `slots` chunks ahead of the wire
        InFlight f{acquireSendSlot(), 0, issued, std::min<uint64_t>(chunk_, size - issued)};
        issueCopy(f, dst, dstOffset, static_cast<const char*>(src));
        queue.push_back(f);
        issued += f.bytes;
      }
      post(queue.front(), dst, dstOffset);
      queue.pop_front();
    }
    if (dst.staged) ordersSignals_.store(true, std::memory_order_release);
  } catch (...) {
    failConnection();  // the slot rings are out of step now: the connection is unusable
    throw;
  }
}

void StagingEngine::signal(const RemoteMemoryImpl& dst, uint64_t dstOffset, uint64_t value) {
  std::lock_guard<std::mutex> lock(sendMutex_);
  if (stopped_) throw Error(ErrorCode::InvalidUsage, conn_.describe() + " is closed (its communicator was destroyed)");
  try {
    const uint32_t slot = acquireSendSlot();
    const uint32_t landing = reserveLandingSlot();
    StagingSlotHeader h{kStagingMagic, kStagedSignal, landingSeq_ - 1, dst.regionId, dstOffset, 0, value, {0, 0}};
    std::memcpy(sendSlot(slot), &h, sizeof h);
    TimeInto timed(times_.post);
    postIndex_[slot] = conn_.postWriteSignal(sendReg_->handleFor(conn_.plugin), slot * stride_, peerLanding_->rkey,
                                             landing * stride_, kSlotHeaderBytes, peerControl_->rkey, 0, 1);
  } catch (...) {
    failConnection();
    throw;
  }
}

std::string StagingEngine::describeState() const {
  // Called while the communicator lives; stop() comes only with its end.
  if (stopping_.load(std::memory_order_acquire)) return "staging stopped";
  const uint64_t* ctl = control();
  const uint64_t sent = landingSeq_.load(), credits = __atomic_load_n(&ctl[1], __ATOMIC_ACQUIRE);
  const uint64_t arrived = __atomic_load_n(&ctl[0], __ATOMIC_ACQUIRE), taken = taken_.load(), retired = retired_.load();
  return "staging: sent " + std::to_string(sent) + " slots (" + std::to_string(sendSeq_.load()) +
         " copied out of the GPU), the peer drained " + std::to_string(credits) + " (" +
         std::to_string(sent - credits) + " of " + std::to_string(slots_) + " landing slots in use there); received " +
         std::to_string(arrived) + ", " + std::to_string(taken) + " queued to the GPU, " + std::to_string(retired) +
         " done (" + std::to_string(arrived - taken) + " waiting for a queue place); sender time: " +
         msText(times_.waitSendSlot) + " waiting for send slots, " + msText(times_.waitCredit) + " for landing slots, " + msText(times_.copyOut) + " copying out of the GPU, " + msText(times_.post) +
         " posting; receiver: " + msText(times_.landed) + " from arrivals to their GPU copies' ends";
}

void StagingEngine::failConnection() {
  std::exception_ptr e = std::current_exception();
  std::lock_guard<std::mutex> lock(conn_.mutex);
  conn_.fail(e);
}

void StagingEngine::stop() {
  std::lock_guard<std::mutex> lock(sendMutex_);
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  if (receiver_.joinable()) receiver_.join();
  // Queued copies and host functions refer to the rings: let them finish first.
  if (receiveStream_) cudaStreamSynchronize(receiveStream_);
  if (sendStream_) cudaStreamSynchronize(sendStream_);
  peerLanding_.reset();
  peerControl_.reset();
  for (auto* reg : {sendReg_.get(), landingReg_.get(), controlReg_.get()})
    if (reg) reg->release();
  for (cudaEvent_t e : sendEvents_) cudaEventDestroy(e);
  for (cudaEvent_t e : landedEvents_) cudaEventDestroy(e);
  sendEvents_.clear();
  landedEvents_.clear();
  if (sendStream_) cudaStreamDestroy(sendStream_);
  if (receiveStream_) cudaStreamDestroy(receiveStream_);
  sendStream_ = receiveStream_ = nullptr;
  sendRing_.reset();
  landingRing_.reset();
  control_.reset();
}

}  // namespace plugboard
