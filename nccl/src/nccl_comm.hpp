// What an ncclComm_t points to: a Plugboard communicator with its GPU
// collectives on one device, plus the stream ordering NCCL promises and
// GpuCollectives needs.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "nccl.h"
#include "plugboard/bootstrap.hpp"
#include "plugboard/communicator.hpp"
#include "plugboard/gpu/collectives.hpp"
#include "premul_sum_ops.hpp"
#include "real_nccl_comm.hpp"

/// The type behind ncclWindow_t: what ncclCommWindowRegister was given.
struct ncclWindow_vidmem {
  void* buff;
  size_t size;
  int flags;
};

/// The opaque type behind ncclComm_t (global namespace, as nccl.h declares it).
struct ncclComm {
  /// Joins rank of nranks on the current device (collective), and the real
  /// NCCL beside it when nccl_fallback_library is set. Reads the settings
  /// as Communicator does (PLUGBOARD_CONFIG or defaults + env).
  ncclComm(int rank, int nranks, const plugboard::UniqueId& id);
  /// config.blocking = 0: the same set-up on a thread of its own (on the
  /// current device); initState() says when it is done. Returns at once.
  static ncclComm* startNonBlocking(int rank, int nranks, const plugboard::UniqueId& id);
  /// Waits for a non-blocking set-up still running (as NCCL's destroy does).
  ~ncclComm();

  /// What a non-blocking set-up has come to.
  enum class InitState { Ready, InProgress, Failed };
  InitState initState() const { return state_.load(std::memory_order_acquire); }
  /// Why a non-blocking set-up failed, and the NCCL code for it (Failed only).
  const std::string& initError() const { return initError_; }
  ncclResult_t initResult() const { return initResult_; }
  /// ncclCommAbort: the communicator's waits end and the object goes; a
  /// set-up still running finishes on its own thread (bounded by the
  /// "timeout" setting) and frees it there.
  void abortAndFree();
  ncclComm(const ncclComm&) = delete;
  ncclComm& operator=(const ncclComm&) = delete;

  /// Issues body (one GpuCollectives call on `stream`) on this comm's
  /// device, ordered after every earlier call of the comm: the calls share
  /// device counters, so a call on another stream first waits for the
  /// event recorded after the previous call (recorded after every call, so
  /// a stream the program destroyed since is never touched). `alsoAfter`:
  /// another stream whose work so far must precede the call (and which sees
  /// its results), for a grouped send and receive on two streams.
  template <typename Body>
  void issue(cudaStream_t stream, Body&& body, cudaStream_t alsoAfter = nullptr) {
    DeviceScope scope(device);
    before(stream, alsoAfter);
    body();
    after(stream, alsoAfter);
  }
  /// Bounded wait (2 x gpu_wait_timeout + 5 s) for this comm's last call
  /// (none if it was captured into a graph), then the recorded errors.
  void finalize();

  int rank() const { return comm->rank(); }
  int size() const { return comm->size(); }

  int device = 0;
  /// Made with config.blocking = 0: splits and shrinks given no config
  /// inherit it, as NCCL's do.
  bool nonBlocking = false;
  std::shared_ptr<plugboard::TcpBootstrap> bootstrap;
  std::unique_ptr<plugboard::Communicator> comm;
  std::unique_ptr<plugboard::GpuCollectives> gpu;
  /// Ops made by ncclRedOpCreatePreMulSum on this comm.
  plugboard::ncclapi::PreMulSumOps preMulOps;
  /// Windows of ncclCommWindowRegister alive on this comm (they change
  /// nothing: the collectives need no registration).
  std::map<ncclWindow_t, std::unique_ptr<ncclWindow_vidmem>> windows;
  bool windowsLogged = false;  ///< The first window's note is in the log.
  /// The real NCCL beside this comm (nccl_fallback_library), or null.
  std::unique_ptr<plugboard::ncclapi::RealNcclComm> real;
  /// The real NCCL when it serves call on this comm (nccl_fallback_calls), else null.
  plugboard::ncclapi::RealNcclComm* forwards(plugboard::ncclapi::FallbackCall call) const {
    return real && real->serves(call) ? real.get() : nullptr;
  }

 private:
  /// Makes `device` current for its lifetime, then restores the caller's.
  struct DeviceScope {
    explicit DeviceScope(int device);
    ~DeviceScope();
    int previous = -1;
    bool changed = false;
  };
  void before(cudaStream_t stream, cudaStream_t alsoAfter);
  void after(cudaStream_t stream, cudaStream_t alsoAfter);

  ncclComm() = default;
  /// The set-up: bootstrap, communicator, GPU collectives, real NCCL, events.
  void join(int rank, int nranks, const plugboard::UniqueId& id);
  /// Abort, then free (a ready or failed communicator).
  void abortNow();

  std::atomic<InitState> state_{InitState::Ready};
  std::string initError_;
  ncclResult_t initResult_ = ncclSuccess;
  std::thread initThread_;
  /// Set by the set-up thread's end and by abortAndFree(): whichever finds
  /// it already set frees the abandoned object.
  std::atomic<bool> initDoneOrAbandoned_{false};
  cudaStream_t lastStream_ = nullptr;
  bool entered_ = false;
  bool capturing_ = false;      // the current call's stream is being captured into a graph
  bool doneCaptured_ = false;   // done_ was last recorded into a capture, not on a stream
  cudaEvent_t done_ = nullptr;  // recorded after every call on its stream
  cudaEvent_t join_ = nullptr;  // alsoAfter's work so far
};
