// Turns a failed CUDA runtime call into Error(System) naming the call.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "plugboard/error.hpp"

/// Throws plugboard::Error(System) "what: cudaGetErrorString (code)" unless call succeeds.
#define PB_CUDA_CHECK(call)                                                                           \
  do {                                                                                                \
    cudaError_t pb_cuda_err_ = (call);                                                                \
    if (pb_cuda_err_ != cudaSuccess)                                                                  \
      throw ::plugboard::Error(::plugboard::ErrorCode::System,                                        \
                               std::string(#call) + " failed: " + cudaGetErrorString(pb_cuda_err_) +  \
                                   " (" + std::to_string(static_cast<int>(pb_cuda_err_)) + ")");      \
  } while (0)
