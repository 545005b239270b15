// GPU or host buffers: resolving --mem against the build and the machine,
// and counting CUDA devices without initialising CUDA in this process.
#pragma once

#include "options.hpp"

namespace plugboard::perf {

/// True when plugboard-perf was built with CUDA (PLUGBOARD_HAVE_CUDA).
bool builtWithCuda();

/// CUDA devices on this machine, counted in a throwaway child process so
/// the caller stays free of CUDA state and can still fork its ranks.
/// 0 without CUDA support or without a usable driver, or when the child
/// gives no answer within 60 s (it is killed).
int cudaDeviceCountWithoutInit();

/// CUDA devices, counted in this process (which initialises CUDA here):
/// for a process that forks no ranks, e.g. one rank of a launcher, where a
/// child would be one more process for tools such as ncu to follow.
int cudaDeviceCountHere();

/// The mode a run uses: Gpu or Host. Auto becomes Gpu when built with CUDA
/// and deviceCount > 0. Throws Error(InvalidUsage) when the options cannot
/// run in that mode: --mem gpu without CUDA support or without a device
/// ("no CUDA device"), -G or --compare nccl on host buffers.
MemMode resolveMemMode(const Options& opts, bool withCuda, int deviceCount);

}  // namespace plugboard::perf
