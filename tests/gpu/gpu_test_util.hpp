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

/// CUDA devices on this machine, counted in a throwaway child so the test
/// process stays free of CUDA state until it forks its ranks.
inline int gpuCountWithoutInit() {
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    _exit(n > 100 ? 100 : n);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

/// Skips a multi-process test (before any CUDA call in this process).
#define PB_REQUIRE_GPU_NO_INIT()                                        \
  do {                                                                  \
    if (gpuCountWithoutInit() == 0) GTEST_SKIP() << "no CUDA device";   \
  } while (0)
