// The real NCCL beside a communicator (settings nccl_fallback_library and
// nccl_fallback_calls): a communicator of the same ranks in a real NCCL,
// loaded once per process with dlopen, to which the calls that
// nccl_fallback_calls names are handed unchanged.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "fallback_calls.hpp"
#include "nccl_library.hpp"
#include "plugboard/bootstrap.hpp"
#include "plugboard/config.hpp"
#include "plugboard/error.hpp"

namespace plugboard::ncclapi {

/// One rank's real NCCL communicator.
class RealNcclComm {
 public:
  /// Collective over boot: when nccl_fallback_library is set on every rank,
  /// loads it (once per process; 'auto' searches and skips this library)
  /// and joins a real NCCL communicator of the same ranks on the current
  /// device, its unique id made by rank 0 and shared through boot. Null
  /// when it is set on no rank. Throws Error(Config) when only some ranks
  /// set it, or the library cannot be used, naming the rank and the path.
  static std::unique_ptr<RealNcclComm> join(const Config& config, Bootstrap& boot);
  /// ncclCommDestroy (a failure is logged).
  ~RealNcclComm();
  RealNcclComm(const RealNcclComm&) = delete;
  RealNcclComm& operator=(const RealNcclComm&) = delete;

  /// True when call goes to the real NCCL.
  bool serves(FallbackCall call) const { return calls_.has(call); }
  /// The loaded library's functions.
  const NcclApi& api() const { return lib_->api(); }
  /// The real communicator.
  nccl::Comm comm() const { return comm_; }
  /// Throws ApiFailure with the real NCCL's own result code and last error
  /// unless r is ncclSuccess; `call` names the entry point.
  void check(nccl::Result r, const char* call) const;
  /// ncclCommFinalize on the real communicator (blocking, as ours).
  void finalize();
  /// ncclCommAbort on the real communicator; the destructor then does nothing.
  void abort();
  /// The real communicator's asynchronous error, if any.
  std::optional<Error> asyncError() const;

 private:
  RealNcclComm(std::shared_ptr<NcclLibrary> lib, FallbackCalls calls, int rank);
  std::shared_ptr<NcclLibrary> lib_;
  FallbackCalls calls_;
  int rank_ = 0;
  nccl::Comm comm_ = nullptr;
};

/// ncclGroupStart on a real NCCL (none when api is null), and its
/// ncclGroupEnd on every way out; end() ends it now and reports a failure
/// with the real NCCL's code.
class RealNcclGroup {
 public:
  explicit RealNcclGroup(const NcclApi* api);
  ~RealNcclGroup();
  RealNcclGroup(const RealNcclGroup&) = delete;
  RealNcclGroup& operator=(const RealNcclGroup&) = delete;
  /// Ends the group; throws ApiFailure if the real NCCL fails it.
  void end();

 private:
  const NcclApi* api_;
};

}  // namespace plugboard::ncclapi
