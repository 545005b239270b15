// The core's cuda_dmabuf_fd host service (transport ABI 1.3): arguments
// checked, "unsupported" without a GPU (CI), and on a GPU that can export
// dma-bufs a real descriptor with the pointer's offset in its first page.
#include <gtest/gtest.h>
#include <unistd.h>

#include "plugins/cuda_dmabuf.hpp"

#ifdef PLUGBOARD_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace plugboard {
namespace {

TEST(CudaDmabuf, ArgumentsAreChecked) {
  int fd = -1;
  uint64_t offset = 0;
  char byte = 0;
  EXPECT_EQ(exportCudaDmabuf(nullptr, 0, nullptr, &offset), PB_ERR_INVALID);
  EXPECT_EQ(exportCudaDmabuf(nullptr, 0, &fd, nullptr), PB_ERR_INVALID);
  EXPECT_EQ(exportCudaDmabuf(nullptr, 16, &fd, &offset), PB_ERR_INVALID);  // a size without a pointer
  EXPECT_EQ(exportCudaDmabuf(&byte, 0, &fd, &offset), PB_ERR_INVALID);     // a pointer without a size
}

TEST(CudaDmabuf, ExportsDeviceMemoryWhereTheGpuCanElseSaysUnsupported) {
  int fd = -1;
  uint64_t offset = 0;
  const pb_status probe = exportCudaDmabuf(nullptr, 0, &fd, &offset);
  EXPECT_EQ(fd, -1);  // the probe leaves the outputs alone
  char host[64];
  EXPECT_NE(exportCudaDmabuf(host, sizeof host, &fd, &offset), PB_OK) << "host memory is no CUDA device memory";
  if (probe != PB_OK) {
    EXPECT_EQ(probe, PB_ERR_UNSUPPORTED);
    GTEST_SKIP() << "no CUDA device here that exports dma-bufs";
  }
#ifdef PLUGBOARD_HAVE_CUDA
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 1 << 20), cudaSuccess);
  char* inside = static_cast<char*>(device) + 4096 + 100;
  ASSERT_EQ(exportCudaDmabuf(inside, 1000, &fd, &offset), PB_OK);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(offset, (reinterpret_cast<uintptr_t>(inside) % static_cast<uintptr_t>(sysconf(_SC_PAGESIZE))));
  if (fd >= 0) close(fd);
  cudaFree(device);
#endif
}

}  // namespace
}  // namespace plugboard
