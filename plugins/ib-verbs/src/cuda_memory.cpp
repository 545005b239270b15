#include "cuda_memory.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace plugboard::ibverbs {
namespace {

/// Why the dma-buf path is closed ("" when open).
std::string whyNoDmabuf(bool coreExportsDmabuf, const DmabufProbe& nic, const std::string& port) {
  if (!coreExportsDmabuf) return "the core cannot export this GPU's memory as dma-bufs";
  if (!nicRegistersDmabufs(nic))
    return port + " cannot register dma-bufs (ibv_reg_dmabuf_mr: " + std::strerror(nic.error) + ")";
  return "";
}

}  // namespace

DmabufProbe probeDmabuf(ibv_pd* pd) {
  DmabufProbe p;
  errno = 0;
  if (ibv_mr* mr = ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0)) {
    p.registered = true;
    ibv_dereg_mr(mr);
    return p;
  }
  p.error = errno;
  return p;
}

bool nicRegistersDmabufs(const DmabufProbe& probe) {
  return probe.registered || (probe.error != EOPNOTSUPP && probe.error != EPROTONOSUPPORT);
}

bool peerMemoryModuleLoaded() {
  struct stat st;
  return ::stat("/sys/module/nvidia_peermem", &st) == 0 || ::stat("/sys/module/nv_peer_mem", &st) == 0;
}

CudaMemoryPaths cudaMemoryPaths(bool coreExportsDmabuf, const DmabufProbe& nic, bool peerMemoryLoaded,
                                const std::string& port) {
  CudaMemoryPaths p;
  const std::string noDmabuf = whyNoDmabuf(coreExportsDmabuf, nic, port);
  p.dmabuf = noDmabuf.empty();
  p.peerMemory = peerMemoryLoaded;
  if (p.dmabuf) {
    p.reason = p.peerMemory ? "CUDA memory as dma-bufs, else through nvidia-peermem" : "CUDA memory as dma-bufs";
  } else if (p.peerMemory) {
    p.reason = "CUDA memory through nvidia-peermem (not as dma-bufs: " + noDmabuf + ")";
  } else {
    p.reason = "no CUDA memory: " + noDmabuf + ", and no nvidia_peermem module is loaded (the core stages GPU "
               "buffers through host memory)";
  }
  return p;
}

}  // namespace plugboard::ibverbs
