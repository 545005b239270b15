// Shared bits of the GPU tests: skip without a device, check CUDA calls.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

/// Skips the test (with the reason) when this machine has no CUDA device.
#define PB_REQUIRE_GPU()                                                          \
  do {                                                                            \
    int pb_count_ = 0;                                                            \
    if (cudaGetDeviceCount(&pb_count_) != cudaSuccess || pb_count_ == 0) {        \
      cudaGetLastError();                                                         \
      GTEST_SKIP() << "no CUDA device";                                           \
    }                                                                             \
  } while (0)

/// Fails the test unless the CUDA call succeeds.
#define PB_EXPECT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

#include <sys/wait.h>
#include <unistd.h>

/// Number of CUDA devices, counted in a forked child so that this process
/// never initialises CUDA: a test that forks ranks which use CUDA must stay
/// CUDA-free itself (CUDA does not survive fork). Counted once, cached.
inline int pbDeviceCountWithoutInit() {
  static int count = -1;
  if (count >= 0) return count;
  int fds[2];
  if (pipe(fds) != 0) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    ssize_t ignored = write(fds[1], &n, sizeof(n));
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  int n = 0;
  if (pid < 0 || read(fds[0], &n, sizeof(n)) != static_cast<ssize_t>(sizeof(n))) n = 0;
  close(fds[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  count = n;
  return count;
}

/// PB_REQUIRE_GPU() for tests whose CUDA work runs in forked children:
/// skips unless at least n devices exist, without initialising CUDA here.
#define PB_REQUIRE_GPUS_FORKSAFE(n)                                                           \
  do {                                                                                        \
    int pb_count_ = pbDeviceCountWithoutInit();                                               \
    if (pb_count_ == 0) GTEST_SKIP() << "no CUDA device";                                     \
    if (pb_count_ < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA devices, found " << pb_count_; \
  } while (0)
