// The core's cuda_dmabuf_fd host service (transport ABI minor 3): CUDA
// device memory exported as a dma-buf file descriptor, so network plugins
// register GPU memory with their NIC without linking CUDA. Built from
// src/gpu/cuda_dmabuf.cpp with CUDA, src/plugins/nocuda/cuda_dmabuf.cpp
// without (which always answers PB_ERR_UNSUPPORTED).
#pragma once

#include <plugboard/transport.h>

#include <cstddef>
#include <cstdint>

namespace plugboard {

/// The arguments cuda_dmabuf_fd accepts: both outputs, and a pointer
/// exactly when a size (NULL with 0 is the probe).
inline bool dmabufArgumentsValid(const void* ptr, size_t size, const int* fd, const uint64_t* offset) {
  return fd && offset && (ptr == nullptr) == (size == 0);
}

/// pb_host_services_v1::cuda_dmabuf_fd without the core handle: exports
/// [ptr, ptr + size) widened to host pages; ptr NULL and size 0 asks whether
/// the calling thread's device can export at all. PB_ERR_INVALID for
/// arguments dmabufArgumentsValid refuses, in every build. Never throws.
pb_status exportCudaDmabuf(void* ptr, size_t size, int* fd, uint64_t* offset) noexcept;

}  // namespace plugboard
