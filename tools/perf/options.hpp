// plugboard-perf's command line: nccl-tests' flags, plus --nranks, -C,
// --csv, --plot, --mem (device or host buffers) and --compare nccl.
#pragma once

#include <cstddef>
#include <string>

#include "plugboard/datatype.hpp"

namespace plugboard::perf {

/// Where the buffers live (--mem).
enum class MemMode {
  Auto,  ///< Gpu when built with CUDA and a device is present, else Host.
  Gpu,   ///< Device buffers through GpuCollectives.
  Host,  ///< Host buffers through HostCollectives.
};

/// Parses a --mem value (gpu, host, auto); throws Error(InvalidUsage) listing the choices.
MemMode parseMemMode(const std::string& text);
/// "gpu", "host" or "auto".
const char* memModeName(MemMode mode);

/// Parsed command line.
struct Options {
  size_t minBytes = 32 * 1024 * 1024;  ///< -b
  size_t maxBytes = 32 * 1024 * 1024;  ///< -e
  double stepFactor = 1.0;             ///< -f (multiplicative); 1 means use -i
  size_t stepBytes = 1024 * 1024;      ///< -i (additive)
  int iters = 20;                      ///< -n
  int warmup = 5;                      ///< -w
  bool check = true;                   ///< -c
  DataType type = DataType::Float32;   ///< -d
  ReduceOp op = ReduceOp::Sum;         ///< -o
  bool preMul = false;                 ///< -o premulsum: a PreMulSum of scalar 1 (sum's results, the scaling's cost; GPU)
  int root = 0;                        ///< -r
  std::string collective = "allreduce";///< -C
  int nranks = 0;                      ///< --nranks: start this many local ranks (0: use the launcher's env)
  std::string csv;                     ///< --csv FILE
  std::string plot;                    ///< --plot FILE.svg
  MemMode mem = MemMode::Auto;         ///< --mem
  int graphLaunches = 0;               ///< -G: time this many launches of a CUDA graph of the -n iterations (0: no graph)
  bool compareNccl = false;            ///< --compare nccl: run the same sweep through NCCL too
  std::string ncclLib;                 ///< --nccl-lib PATH (else PLUGBOARD_NCCL_LIB, else the default search)
  bool ncclSymmetric = false;          ///< --nccl-symmetric: NCCL's buffers from ncclMemAlloc, registered as symmetric windows
  bool findNccl = false;               ///< --find-nccl: print the NCCL that --compare nccl would load, and exit
  std::string plan;                    ///< --plan FILE: host buffers through this execution plan (HostPlanExecutor)
};

/// Parses argv; throws Error(InvalidUsage) naming the bad flag or value.
Options parseOptions(int argc, char** argv);

/// Parses "16M", "1K", "8" (binary units).
size_t parseSize(const std::string& text, const std::string& flag);

/// The usage text.
const char* usageText();

}  // namespace plugboard::perf
