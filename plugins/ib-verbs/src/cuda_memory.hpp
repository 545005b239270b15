// How CUDA memory reaches the HCA, and whether it can at all. Two paths:
// ibv_reg_dmabuf_mr on a dma-buf the core exports (host service
// cuda_dmabuf_fd), which needs the core, the GPU driver and the NIC's
// driver to handle dma-bufs; and plain ibv_reg_mr on the CUDA pointer where
// the nvidia_peermem (or older nv_peer_mem) module is loaded. Whether the
// NIC takes dma-bufs is probed as NCCL does: registering no dma-buf (fd -1)
// fails with EOPNOTSUPP or EPROTONOSUPPORT where the device or its kernel
// cannot, with another error (EBADF) where it can. The decision is a pure
// function of the three answers, tested without a device.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace plugboard::ibverbs {

/// What ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0) answered.
struct DmabufProbe {
  bool registered = false;  ///< It returned a region (not expected for fd -1); deregistered at once
  int error = 0;            ///< errno when it returned NULL
};

/// Runs the probe on pd.
DmabufProbe probeDmabuf(ibv_pd* pd);

/// False when the probe's errno says the NIC cannot register dma-bufs
/// (EOPNOTSUPP, EPROTONOSUPPORT); true for any other answer.
bool nicRegistersDmabufs(const DmabufProbe& probe);

/// True when a kernel module that lets the HCA register CUDA memory
/// (nvidia_peermem, or the older nv_peer_mem) is loaded.
bool peerMemoryModuleLoaded();

/// How a context registers CUDA memory. Both may hold: dma-buf goes first.
struct CudaMemoryPaths {
  bool dmabuf = false;      ///< ibv_reg_dmabuf_mr on the core's dma-buf
  bool peerMemory = false;  ///< ibv_reg_mr through nvidia-peermem
  std::string reason;       ///< "CUDA memory as dma-bufs", or why neither path is open, for plugboard-info

  /// True when CUDA memory can be registered (the plugin advertises PB_MEM_CUDA).
  bool any() const { return dmabuf || peerMemory; }
};

/// The paths open to a context on port (named in the reason, "mlx5_0 port
/// 1"): dma-buf when the core exports CUDA memory as dma-bufs and the NIC
/// registers them, nvidia-peermem when its module is loaded.
CudaMemoryPaths cudaMemoryPaths(bool coreExportsDmabuf, const DmabufProbe& nic, bool peerMemoryLoaded,
                                const std::string& port);

}  // namespace plugboard::ibverbs
