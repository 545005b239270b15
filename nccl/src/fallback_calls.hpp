// Which NCCL calls go to the real NCCL (nccl_fallback_calls): a pure part,
// parsed and tested without a GPU.
#pragma once

#include <cstdint>
#include <string>

namespace plugboard::ncclapi {

/// An NCCL call family that can be handed to the real NCCL.
enum class FallbackCall : uint8_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, SendRecv };

/// The set of call families nccl_fallback_calls names.
class FallbackCalls {
 public:
  /// Parses a comma list of allreduce, broadcast, reduce, allgather,
  /// reducescatter, alltoall, sendrecv (case and spaces ignored), or "all";
  /// empty: none. Throws Error(Config) naming the setting and the bad word.
  static FallbackCalls parse(const std::string& text);
  /// True when call goes to the real NCCL.
  bool has(FallbackCall call) const { return (bits_ >> static_cast<unsigned>(call)) & 1u; }
  /// True when no call does.
  bool empty() const { return bits_ == 0; }
  /// "allreduce, sendrecv" (or "none"), in the enum's order.
  std::string describe() const;

 private:
  uint32_t bits_ = 0;
};

/// The setting's word for call ("allreduce").
const char* fallbackCallName(FallbackCall call);

}  // namespace plugboard::ncclapi
