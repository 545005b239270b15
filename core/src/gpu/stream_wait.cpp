// Bounded host waits: poll the stream or event, yielding the CPU for the
// first millisecond (a short collective ends within it), then sleeping
// 100 us between polls so a long wait does not burn a core.
#include "plugboard/gpu/stream_wait.hpp"

#include <chrono>
#include <cstdio>
#include <thread>

#include "plugboard/error.hpp"

namespace plugboard {
namespace {

template <typename Query>
void pollUntilDone(Query query, double timeoutSeconds, const std::string& what,
                   const std::function<void()>& whileWaiting = {}) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeoutSeconds));
  for (;;) {
    const cudaError_t e = query();
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady)
      throw Error(ErrorCode::System, what + ": CUDA reported " + cudaGetErrorString(e) + " (" +
                                         std::to_string(static_cast<int>(e)) + ")");
    const auto now = Clock::now();
    if (now >= deadline) {
      char limit[32];
      std::snprintf(limit, sizeof(limit), "%g s", timeoutSeconds);
      throw Error(ErrorCode::Timeout,
                  what + ": the GPU work did not finish within " + limit +
                      " (device waits end by themselves after gpu_wait_timeout: a kernel still running is not being "
                      "scheduled, e.g. another process holds the GPU or the CUDA MPS server is broken)");
    }
    if (whileWaiting) whileWaiting();
    if (now - start < std::chrono::milliseconds(1)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace

void waitForStream(cudaStream_t stream, double timeoutSeconds, const std::string& what) {
  pollUntilDone([stream] { return cudaStreamQuery(stream); }, timeoutSeconds, what);
}

void waitForStream(cudaStream_t stream, double timeoutSeconds, const std::string& what,
                   const std::function<void()>& whileWaiting) {
  pollUntilDone([stream] { return cudaStreamQuery(stream); }, timeoutSeconds, what, whileWaiting);
}

void waitForEvent(cudaEvent_t event, double timeoutSeconds, const std::string& what) {
  pollUntilDone([event] { return cudaEventQuery(event); }, timeoutSeconds, what);
}

}  // namespace plugboard
