#include "signal_kernel.hpp"

namespace plugboard::cudaipc {

namespace {

// Runs after every earlier operation of its stream has completed (stream
// order), so the copies of earlier writes are in the peer's memory before
// the add. The fence makes this thread's view of them ordered before the
// add at system scope, which is the scope the peer (another process, maybe
// another GPU, maybe the host) observes the counter at.
__global__ void signalAddKernel(unsigned long long* target, unsigned long long value) {
  __threadfence_system();
  atomicAdd_system(target, value);
}

}  // namespace

cudaError_t launchSignalAdd(cudaStream_t stream, uint64_t* target, uint64_t value) {
  auto* t = reinterpret_cast<unsigned long long*>(target);
  auto v = static_cast<unsigned long long>(value);
  void* args[] = {&t, &v};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&signalAddKernel), dim3(1), dim3(1), args, 0, stream);
}

cudaError_t preloadSignalKernel() {
  // Loads the module now. With CUDA's lazy loading, the first launch would
  // load it then, and loading can wait behind a running kernel: a user
  // kernel that spins until this signal lands would then never finish.
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&signalAddKernel));
}

}  // namespace plugboard::cudaipc
