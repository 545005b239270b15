// The PreMulSum reduction ops of one communicator (ncclRedOpCreatePreMulSum):
// each is "multiply every input element by a scalar, then sum". Pure
// bookkeeping, no CUDA: the core scales (plugboard::preMulScale, and the
// pipelined kernels as they reduce).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "plugboard/datatype.hpp"

namespace plugboard::ncclapi {

/// One PreMulSum op.
struct PreMulSum {
  DataType type = DataType::Float32;  ///< The calls using it must have this type (NCCL's rule).
  bool scalarOnDevice = false;        ///< ncclScalarDevice: read *deviceScalar when each call runs.
  const void* deviceScalar = nullptr;
  std::array<uint8_t, 8> hostValue{};  ///< ncclScalarHostImmediate: the scalar's bytes, copied at creation.
};

/// A communicator's PreMulSum ops, numbered from ncclNumOps (5) up, as NCCL
/// numbers them; a destroyed op's number is given out again.
class PreMulSumOps {
 public:
  /// The first number handed out (nccl.h's ncclNumOps).
  static constexpr int kFirstId = 5;
  /// Most ops alive at once per communicator.
  static constexpr size_t kMaxOps = 1 << 16;

  /// Records op; its number, or nullopt when kMaxOps are alive.
  std::optional<int> add(const PreMulSum& op);
  /// The op with this number, if alive.
  std::optional<PreMulSum> find(int id) const;
  /// Forgets the op; false if no such op is alive.
  bool remove(int id);
  /// Ops alive.
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<int, PreMulSum> ops_;
};

}  // namespace plugboard::ncclapi
