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
