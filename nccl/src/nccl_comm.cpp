#include "nccl_comm.hpp"

#include <cstdlib>
#include <string>

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

ncclComm::ncclComm(int rank, int nranks, const plugboard::UniqueId& id) {
  cudaCheck(cudaGetDevice(&device), "cudaGetDevice");
  plugboard::CommunicatorOptions options;
  options.config = loadConfig();
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.config->getDouble("timeout") * 1000));
  bootstrap = std::make_shared<plugboard::TcpBootstrap>(rank, nranks, id, timeout);
  comm = std::make_unique<plugboard::Communicator>(bootstrap, options);
  gpu = std::make_unique<plugboard::GpuCollectives>(*comm);
  cudaCheck(cudaEventCreateWithFlags(&order_, cudaEventDisableTiming), "cudaEventCreate");
}

// The collectives go before the communicator, the communicator before its bootstrap.
ncclComm::~ncclComm() {
  gpu.reset();
  comm.reset();
  if (order_) cudaEventDestroy(order_);
}

void ncclComm::enter(cudaStream_t stream) {
  if (entered_ && stream != lastStream_) {
    cudaCheck(cudaEventRecord(order_, lastStream_), "cudaEventRecord (ordering this communicator's streams)");
    cudaCheck(cudaStreamWaitEvent(stream, order_, 0), "cudaStreamWaitEvent (ordering this communicator's streams)");
  }
  entered_ = true;
  lastStream_ = stream;
}

void ncclComm::finalize() {
  if (entered_) gpu->synchronize(lastStream_);
  gpu->checkErrors();
}
