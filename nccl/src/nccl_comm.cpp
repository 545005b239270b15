#include "nccl_comm.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>
#include <string>

#include "nccl_error.hpp"
#include "plugboard/config.hpp"
#include "plugboard/error.hpp"

namespace {

void cudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw plugboard::Error(plugboard::ErrorCode::System, std::string(what) + ": " + cudaGetErrorString(e));
}

/// The settings Communicator would read by itself, read once here so the
/// bootstrap's timeout is the "timeout" setting too.
plugboard::Config loadConfig() {
  const char* path = std::getenv("PLUGBOARD_CONFIG");
  return path && *path ? plugboard::Config::fromYamlFile(path) : plugboard::Config::fromEnvironment();
}

}  // namespace

ncclComm::ncclComm(int rank, int nranks, const plugboard::UniqueId& id) { join(rank, nranks, id); }

ncclComm* ncclComm::startNonBlocking(int rank, int nranks, const plugboard::UniqueId& id) {
  std::unique_ptr<ncclComm> c(new ncclComm());
  cudaCheck(cudaGetDevice(&c->device), "cudaGetDevice");
  c->state_.store(InitState::InProgress, std::memory_order_relaxed);
  c->nonBlocking = true;
  ncclComm* self = c.get();
  c->initThread_ = std::thread([self, rank, nranks, id] {
    InitState end = InitState::Ready;
    try {
      cudaCheck(cudaSetDevice(self->device), "cudaSetDevice (the set-up thread)");
      self->join(rank, nranks, id);
    } catch (const plugboard::Error& e) {
      self->initError_ = e.what();
      self->initResult_ = static_cast<ncclResult_t>(plugboard::ncclapi::resultFor(e.code()));
      end = InitState::Failed;
    } catch (const std::exception& e) {
      self->initError_ = e.what();
      self->initResult_ = ncclInternalError;
      end = InitState::Failed;
    }
    self->state_.store(end, std::memory_order_release);
    if (self->initDoneOrAbandoned_.exchange(true)) self->abortNow();  // abandoned by ncclCommAbort
  });
  return c.release();
}

void ncclComm::abortAndFree() {
  if (!initThread_.joinable()) return abortNow();
  initThread_.detach();
  if (initDoneOrAbandoned_.exchange(true)) abortNow();  // the set-up already ended; else its thread frees it
}

void ncclComm::abortNow() {
  if (real) real->abort();
  if (comm) comm->abort();
  delete this;
}

void ncclComm::join(int rank, int nranks, const plugboard::UniqueId& id) {
  cudaCheck(cudaGetDevice(&device), "cudaGetDevice");
  plugboard::CommunicatorOptions options;
  options.config = loadConfig();
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.config->getDouble("timeout") * 1000));
  bootstrap = std::make_shared<plugboard::TcpBootstrap>(rank, nranks, id, timeout);
  comm = std::make_unique<plugboard::Communicator>(bootstrap, options);
  gpu = std::make_unique<plugboard::GpuCollectives>(*comm);
  real = plugboard::ncclapi::RealNcclComm::join(comm->config(), *bootstrap);
  cudaCheck(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
  cudaCheck(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming), "cudaEventCreate");
}

// The real NCCL and the collectives go before the communicator, the
// communicator before its bootstrap.
ncclComm::~ncclComm() {
  if (initThread_.joinable()) initThread_.join();
  real.reset();
  gpu.reset();
  comm.reset();
  if (done_) cudaEventDestroy(done_);
  if (join_) cudaEventDestroy(join_);
}

ncclComm::DeviceScope::DeviceScope(int device) {
  cudaCheck(cudaGetDevice(&previous), "cudaGetDevice");
  if (previous != device) {
    cudaCheck(cudaSetDevice(device), "cudaSetDevice (the communicator's device)");
    changed = true;
  }
}

ncclComm::DeviceScope::~DeviceScope() {
  if (changed) cudaSetDevice(previous);
}

namespace {
bool isCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaCheck(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
  return status == cudaStreamCaptureStatusActive;
}
}  // namespace

// An event recorded inside a capture is a graph node: it orders only work of
// the same capture, so waits cross between captured and live streams never
// (a graph's launches are ordered by the program, as with NCCL).
void ncclComm::before(cudaStream_t stream, cudaStream_t alsoAfter) {
  capturing_ = isCapturing(stream);
  if (entered_ && stream != lastStream_ && doneCaptured_ == capturing_)
    cudaCheck(cudaStreamWaitEvent(stream, done_, 0), "cudaStreamWaitEvent (ordering this communicator's streams)");
  if (alsoAfter && alsoAfter != stream && isCapturing(alsoAfter) == capturing_) {
    cudaCheck(cudaEventRecord(join_, alsoAfter), "cudaEventRecord (a grouped receive's stream)");
    cudaCheck(cudaStreamWaitEvent(stream, join_, 0), "cudaStreamWaitEvent (a grouped receive's stream)");
  }
}

void ncclComm::after(cudaStream_t stream, cudaStream_t alsoAfter) {
  cudaCheck(cudaEventRecord(done_, stream), "cudaEventRecord (after a call)");
  doneCaptured_ = capturing_;
  if (alsoAfter && alsoAfter != stream && isCapturing(alsoAfter) == capturing_)
    cudaCheck(cudaStreamWaitEvent(alsoAfter, done_, 0), "cudaStreamWaitEvent (a grouped receive's stream)");
  entered_ = true;
  lastStream_ = stream;
}

void ncclComm::finalize() {
  DeviceScope scope(device);
  if (real) real->finalize();
  const double waitTimeout = comm->config().getDouble("gpu_wait_timeout");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(2 * waitTimeout + 5);
  while (entered_ && !doneCaptured_) {
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) cudaCheck(e, "cudaEventQuery (the communicator's last call)");
    if (std::chrono::steady_clock::now() > deadline)
      throw plugboard::Error(plugboard::ErrorCode::Timeout,
                             "rank " + std::to_string(rank()) + ": the communicator's last call did not finish within " +
                                 std::to_string(2 * waitTimeout + 5) + " s (2 x gpu_wait_timeout + 5 s)");
    gpu->checkErrors();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  gpu->checkErrors();
}
