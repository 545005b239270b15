#include "gpu_flush.hpp"

namespace plugboard::ibverbs {

void GpuFlushTracker::wrote(size_t qp, bool gpuMemory, uint64_t region, uint32_t rkey, uint64_t remoteAddr,
                            uint64_t length) {
  auto& written = pending_.at(qp);
  if (!gpuMemory || length == 0) return;
  const FlushRead read{qp, remoteAddr + length - 1, rkey};
  for (Written& w : written)
    if (w.region == region) {
      w.read = read;
      return;
    }
  written.push_back({region, read});
}

std::vector<FlushRead> GpuFlushTracker::take() {
  std::vector<FlushRead> reads;
  for (auto& written : pending_) {
    for (const Written& w : written) reads.push_back(w.read);
    written.clear();
  }
  return reads;
}

bool GpuFlushTracker::empty() const {
  for (const auto& written : pending_)
    if (!written.empty()) return false;
  return true;
}

}  // namespace plugboard::ibverbs
