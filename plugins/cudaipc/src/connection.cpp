#include "connection.hpp"

#include <cstring>

#include "cuda_api.hpp"
#include "error.hpp"
#include "signal_kernel.hpp"

namespace plugboard::cudaipc {

Connection::Connection(Context& ctx, const PeerInfo& peer, void* addr, size_t* addrLen) : ctx_(ctx), peer_(peer) {
  IPC_CHECK(addrLen, PB_ERR_INVALID, "cudaipc setup: addr_len must not be NULL");
  size_t room = *addrLen;
  *addrLen = wire::AddressBlob::kSize;
  IPC_CHECK(addr && room >= wire::AddressBlob::kSize, PB_ERR_INVALID,
            "cudaipc setup: address buffer of " + std::to_string(addr ? room : 0) + " bytes is smaller than the " +
                std::to_string(wire::AddressBlob::kSize) + " a cudaipc address needs");
  int ordinal = ctx_.currentDevice();
  if (ordinal < 0) {
    ordinal = 0;
    ctx_.log(PB_LOG_INFO, where() + ": no CUDA context is current on the thread calling setup; using GPU 0");
  }
  dev_ = &ctx_.device(ordinal);
  {
    ContextGuard guard(dev_->primary);
    cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), PB_ERR_SYSTEM,
              where() + ": cudaStreamCreateWithFlags on " + dev_->describe());
    // Set-up time, before any user kernel can be spinning on our signals.
    cudaCheck(preloadSignalKernel(), PB_ERR_SYSTEM, where() + ": loading the signal kernel on " + dev_->describe());
  }
  wire::AddressBlob blob;
  blob.rank = ctx_.rank();
  blob.pid = ctx_.self().pid;
  blob.machine = ctx_.self().machine;
  blob.pidNamespace = ctx_.self().pidNamespace;
  blob.gpuUuid = dev_->uuid;
  blob.pciBusId = dev_->pciBusId;
  blob.encode(static_cast<uint8_t*>(addr));
  ctx_.connectionOpened();
}

Connection::~Connection() {
  try {
    ContextGuard guard(dev_->primary);
    // Copies and signal kernels cannot be cancelled, and none of them waits
    // on anything, so this always returns (GPU faults included: then it
    // returns the error).
    if (stream_) cudaStreamSynchronize(stream_);
    for (const InFlight& f : inflight_)
      if (f.event) cudaEventDestroy(f.event);
    for (cudaEvent_t e : spareEvents_) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
    cudaGetLastError();
  } catch (...) {
  }
  if (!rkeys_.empty())
    ctx_.log(PB_LOG_WARN, where() + ": free with " + std::to_string(rkeys_.size()) +
                              " imported key(s) never released; releasing them");
  for (const RemoteRegion* r : rkeys_) {
    ctx_.imports().release(r->mapping);
    delete r;
  }
  ctx_.connectionClosed();
}

std::string Connection::where() const {
  return "cudaipc: rank " + std::to_string(ctx_.rank()) + " -> " + peer_.describe();
}

bool Connection::connect(const void* peerAddr, size_t peerAddrLen) {
  if (connected_) return true;
  IPC_CHECK(peerAddr, PB_ERR_INVALID, where() + ": proxy_connect needs the peer's address blob");
  IPC_CHECK(peerAddrLen == wire::AddressBlob::kSize, PB_ERR_INVALID,
            where() + ": the peer's address blob is " + std::to_string(peerAddrLen) + " bytes, a cudaipc address is " +
                std::to_string(wire::AddressBlob::kSize) + " (a blob from another transport?)");
  auto blob = wire::AddressBlob::decode(static_cast<const uint8_t*>(peerAddr));
  IPC_CHECK(blob.magic == wire::kAddressMagic, PB_ERR_INVALID,
            where() + ": the peer's address blob is not a cudaipc address (bad magic)");
  IPC_CHECK(blob.version == wire::kVersion, PB_ERR_REMOTE,
            where() + ": the peer speaks cudaipc address format " + std::to_string(blob.version) +
                ", this plugin speaks " + std::to_string(wire::kVersion));
  IPC_CHECK(blob.rank == peer_.rank, PB_ERR_REMOTE,
            where() + ": the address blob came from rank " + std::to_string(blob.rank));
  IPC_CHECK(blob.machine == ctx_.self().machine, PB_ERR_REMOTE,
            where() + ": the peer runs on another machine than this rank (host " + ctx_.hostname() +
                "): its kernel boot id differs, although the core reported the same host (same host_id on "
                "two machines?). CUDA IPC works within one machine only");

  std::string peerBus(blob.pciBusId.data());
  std::string peerGpu = "GPU " + peerBus;
  ContextGuard guard(dev_->primary);
  if (blob.gpuUuid == dev_->uuid) {
    route_ = dev_->describe() + " (both ranks)";
  } else {
    int peerOrdinal = -1;
    if (cudaDeviceGetByPCIBusId(&peerOrdinal, peerBus.c_str()) != cudaSuccess) {
      cudaGetLastError();
      peerOrdinal = -1;
    }
    if (peerOrdinal < 0) {
      // CUDA_VISIBLE_DEVICES hides it: CUDA IPC still maps it, but we cannot
      // ask about peer access; the driver's answer comes at import.
      route_ = dev_->describe() + " -> " + peerGpu + " (not visible here)";
    } else {
      int canAccess = 0;
      cudaCheck(cudaDeviceCanAccessPeer(&canAccess, dev_->ordinal, peerOrdinal), PB_ERR_SYSTEM,
                where() + ": cudaDeviceCanAccessPeer");
      IPC_CHECK(canAccess, PB_ERR_UNSUPPORTED,
                where() + ": " + dev_->describe() + " cannot access the peer's GPU " + std::to_string(peerOrdinal) +
                    " (" + peerBus + "): CUDA reports no peer access between them (no NVLink/P2P path); use "
                    "another transport for this pair");
      route_ = dev_->describe() + " -> GPU " + std::to_string(peerOrdinal) + " (" + peerBus + "), peer access";
    }
  }
  connected_ = true;
  ctx_.log(PB_LOG_INFO, where() + " connected: " + route_);
  return true;
}

RemoteRegion* Connection::importKey(const void* buf, size_t len) {
  wire::PackedRkey key = parseRkey(buf, len, ctx_.self(), peer_.describe());
  auto region = std::make_unique<RemoteRegion>();
  region->mapping = ctx_.imports().acquire(key, *dev_, ctx_.self(), peer_.describe());
  region->base = region->mapping->base ? region->mapping->base + key.offset : nullptr;
  region->size = key.size;
  region->conn = this;
  rkeys_.insert(region.get());
  return region.release();
}

void Connection::releaseKey(RemoteRegion* rkey) {
  requireOwnKey(rkey, "release_rkey");
  if (posted_ != completed_ && stream_) {
    // Unmapping under a copy still writing through the mapping would fault.
    ContextGuard guard(dev_->primary);
    cudaError_t e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) cudaGetLastError();
  }
  rkeys_.erase(rkey);
  ctx_.imports().release(rkey->mapping);
  delete rkey;
}

void* Connection::remotePointer(RemoteRegion* rkey) const {
  requireOwnKey(rkey, "remote_pointer");
  return rkey->base;
}

void Connection::requireUsable() const {
  if (failure_) throw Error(failure_->status, failure_->reason);
  IPC_CHECK(connected_, PB_ERR_INVALID, where() + ": not connected (proxy_connect has not returned PB_OK)");
}

void Connection::requireOwnKey(const RemoteRegion* rkey, const char* op) const {
  IPC_CHECK(rkey && rkeys_.count(rkey), PB_ERR_INVALID,
            where() + ": " + op + ": not a key imported on this connection (released already, or imported on "
                                  "another connection?)");
}

void Connection::checkWrite(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                            size_t size, const char* op) const {
  IPC_CHECK(ctx_.exports().contains(&src), PB_ERR_INVALID,
            where() + ": " + op + ": the source is not a region registered with this context");
  requireOwnKey(&dst, op);
  IPC_CHECK(rangeFits(srcOffset, size, src.size), PB_ERR_INVALID,
            where() + ": " + op + " of " + std::to_string(size) + " bytes from offset " + std::to_string(srcOffset) +
                " is out of range of the " + std::to_string(src.size) + "-byte source region");
  IPC_CHECK(rangeFits(dstOffset, size, dst.size), PB_ERR_INVALID,
            where() + ": " + op + " of " + std::to_string(size) + " bytes to offset " + std::to_string(dstOffset) +
                " is out of range of the peer's " + std::to_string(dst.size) + "-byte region");
}

void Connection::checkSignal(const RemoteRegion& dst, size_t dstOffset, const char* op) const {
  requireOwnKey(&dst, op);
  IPC_CHECK(rangeFits(dstOffset, sizeof(uint64_t), dst.size), PB_ERR_INVALID,
            where() + ": " + op + " at offset " + std::to_string(dstOffset) + " is out of range of the peer's " +
                std::to_string(dst.size) + "-byte region (a signal targets 8 bytes)");
  IPC_CHECK(reinterpret_cast<uintptr_t>(dst.base + dstOffset) % alignof(uint64_t) == 0, PB_ERR_INVALID,
            where() + ": " + op + " at offset " + std::to_string(dstOffset) + " is not 8-byte aligned");
}

cudaEvent_t Connection::takeEvent() {
  if (!spareEvents_.empty()) {
    cudaEvent_t e = spareEvents_.back();
    spareEvents_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  cudaError_t st = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  if (st != cudaSuccess) failCuda(st, "cudaEventCreateWithFlags");
  return e;
}

void Connection::failCuda(cudaError_t error, const std::string& what) {
  cudaGetLastError();
  if (!failure_) {
    failure_ = Failure{PB_ERR_SYSTEM, where() + ": " + what + " failed on " + dev_->describe() + ": " +
                                          cudaText(error) + "; the connection is unusable"};
    ctx_.log(PB_LOG_WARN, failure_->reason);
  }
  throw Error(failure_->status, failure_->reason);
}

void Connection::enqueueCopy(const LocalRegion& src, size_t srcOffset, RemoteRegion& dst, size_t dstOffset,
                             size_t size) {
  if (size == 0) return;
  cudaError_t e =
      cudaMemcpyAsync(dst.base + dstOffset, src.ptr + srcOffset, size, cudaMemcpyDeviceToDevice, stream_);
  if (e != cudaSuccess) failCuda(e, "cudaMemcpyAsync of " + std::to_string(size) + " bytes");
}

void Connection::enqueueSignal(RemoteRegion& dst, size_t dstOffset, uint64_t value) {
  cudaError_t e = launchSignalAdd(stream_, reinterpret_cast<uint64_t*>(dst.base + dstOffset), value);
  if (e != cudaSuccess) failCuda(e, "launching the signal kernel");
}

uint64_t Connection::finishPost(bool gpuWork) {
  cudaEvent_t event = nullptr;
  if (gpuWork) {
    event = takeEvent();
    cudaError_t e = cudaEventRecord(event, stream_);
    if (e != cudaSuccess) {
      spareEvents_.push_back(event);
      failCuda(e, "cudaEventRecord");
    }
  }
  inflight_.push_back(InFlight{++posted_, event});
  return posted_;
}

uint64_t Connection::postWrite(const LocalRegion& src, size_t srcOffset, RemoteRegion& dst, size_t dstOffset,
                               size_t size) {
  requireUsable();
  checkWrite(src, srcOffset, dst, dstOffset, size, "write");
  ContextGuard guard(dev_->primary);
  enqueueCopy(src, srcOffset, dst, dstOffset, size);
  return finishPost(size != 0);
}

uint64_t Connection::postSignal(RemoteRegion& dst, size_t dstOffset, uint64_t value) {
  requireUsable();
  checkSignal(dst, dstOffset, "signal");
  ContextGuard guard(dev_->primary);
  enqueueSignal(dst, dstOffset, value);
  return finishPost(true);
}

uint64_t Connection::postWriteSignal(const LocalRegion& src, size_t srcOffset, RemoteRegion& dst, size_t dstOffset,
                                     size_t size, RemoteRegion& signalDst, size_t signalOffset, uint64_t value) {
  requireUsable();
  checkWrite(src, srcOffset, dst, dstOffset, size, "write_signal");
  checkSignal(signalDst, signalOffset, "write_signal");
  ContextGuard guard(dev_->primary);
  enqueueCopy(src, srcOffset, dst, dstOffset, size);
  enqueueSignal(signalDst, signalOffset, value);
  return finishPost(true);
}

void Connection::progress(uint64_t* completed) {
  if (!inflight_.empty() && !failure_) {
    ContextGuard guard(dev_->primary);
    while (!inflight_.empty()) {
      InFlight& f = inflight_.front();
      if (f.event) {
        cudaError_t e = cudaEventQuery(f.event);
        if (e == cudaErrorNotReady) break;
        if (e != cudaSuccess) {
          *completed = completed_;
          failCuda(e, "operation " + std::to_string(f.seq) +
                          " (a copy or signal; an error here may also come from another kernel that faulted in "
                          "this process)");
        }
        spareEvents_.push_back(f.event);
      }
      completed_ = f.seq;
      inflight_.pop_front();
    }
  }
  *completed = completed_;
  if (failure_) throw Error(failure_->status, failure_->reason);
}

void Connection::flush() { requireUsable(); }

}  // namespace plugboard::cudaipc
