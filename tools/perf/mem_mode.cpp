#include "mem_mode.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugboard/error.hpp"

#ifdef PLUGBOARD_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace plugboard::perf {

bool builtWithCuda() {
#ifdef PLUGBOARD_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cudaDeviceCountHere() {
#ifdef PLUGBOARD_HAVE_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
#else
  return 0;
#endif
}

int cudaDeviceCountWithoutInit() {
#ifdef PLUGBOARD_HAVE_CUDA
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    const int n = cudaDeviceCountHere();
    _exit(n > 100 ? 100 : n);
  }
  int status = 0;
  for (int waitedMs = 0;; waitedMs += 10) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    if (r < 0) return 0;
    if (waitedMs >= 60000) {  // a hung driver call: no devices, not a hung run
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return 0;
    }
    usleep(10000);
  }
#else
  return 0;
#endif
}

MemMode resolveMemMode(const Options& opts, bool withCuda, int deviceCount) {
  MemMode m = opts.mem;
  if (m == MemMode::Auto) m = withCuda && deviceCount > 0 ? MemMode::Gpu : MemMode::Host;
  if (m == MemMode::Gpu && !withCuda)
    throw Error(ErrorCode::InvalidUsage, "--mem gpu: this plugboard-perf was built without CUDA (no nvcc at configure time)");
  if (m == MemMode::Gpu && deviceCount <= 0) throw Error(ErrorCode::InvalidUsage, "--mem gpu: no CUDA device");
  if (m == MemMode::Host) {
    std::string why = opts.mem == MemMode::Auto ? (withCuda ? " (no CUDA device)" : " (built without CUDA)") : "";
    if (opts.graphLaunches > 0)
      throw Error(ErrorCode::InvalidUsage, "-G " + std::to_string(opts.graphLaunches) + " needs GPU buffers; this run uses host buffers" + why);
    if (opts.compareNccl)
      throw Error(ErrorCode::InvalidUsage, "--compare nccl needs GPU buffers; this run uses host buffers" + why);
  }
  return m;
}

}  // namespace plugboard::perf
