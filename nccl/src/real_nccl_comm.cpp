#include "real_nccl_comm.hpp"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "nccl.h"
#include "nccl_error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard::ncclapi {
namespace {

/// Throws Error(Config) when a library of this process exports its own copy
/// of the C++ runtime's std::call_once state (a toolchain that links
/// libstdc++ statically, as some do by default): the real NCCL, bound to
/// itself and the shared libstdc++ (RTLD_DEEPBIND), would run a call_once
/// whose state that copy shadows, and crash on a null call.
void requireOneCxxRuntime(int rank) {
  // __once_proxy, not the thread-local __once_call: dladdr maps code, not TLS.
  void* onceProxy = dlsym(RTLD_DEFAULT, "__once_proxy");
  Dl_info info{};
  if (!onceProxy || !dladdr(onceProxy, &info) || !info.dli_fname) return;
  const std::string object = info.dli_fname;
  if (object.find("libstdc++.so") != std::string::npos) return;
  throw Error(ErrorCode::Config, "rank " + std::to_string(rank) + ": " + object +
                                     " exports its own copy of the C++ runtime (__once_proxy: libstdc++ linked "
                                     "statically), which a real NCCL loaded beside it would trip over; build "
                                     "Plugboard with the shared libstdc++ to use nccl_fallback_library");
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // their runtimes abort a dlopen with RTLD_DEEPBIND
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

/// The process's real NCCL: loaded by the first communicator that asks,
/// kept for the life of the process (NCCL keeps threads and state).
std::shared_ptr<NcclLibrary> processLibrary(const std::string& request, int rank) {
  static std::mutex mu;
  static std::shared_ptr<NcclLibrary> loaded;
  static std::string loadedRequest;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded) {
    if (request != loadedRequest)
      throw Error(ErrorCode::Config, "rank " + std::to_string(rank) + ": nccl_fallback_library = '" + request +
                                         "', but this process already loaded '" + loadedRequest + "' (" +
                                         loaded->path() + "); one real NCCL per process");
    return loaded;
  }
  if (kSanitized)
    throw Error(ErrorCode::Config, "rank " + std::to_string(rank) + ": nccl_fallback_library cannot be used in a "
                                       "sanitizer build (its runtime aborts the RTLD_DEEPBIND load a real NCCL needs)");
  requireOneCxxRuntime(rank);
  NcclLoadRules rules;
  rules.remedy = "nccl_fallback_library (PLUGBOARD_NCCL_FALLBACK_LIBRARY)";
  rules.purpose = "nccl_fallback_library = auto";
  rules.refuseVersionFunction = reinterpret_cast<const void*>(&ncclGetVersion);
  rules.deepBind = true;
  const std::string path = request == "auto" ? "" : request;
  auto lib = NcclLibrary::load(path, "nccl_fallback_library", rules);
  const NcclApi& a = lib->api();
  for (auto [fn, name] : {std::pair<const void*, const char*>{reinterpret_cast<const void*>(a.commAbort), "ncclCommAbort"},
                          {reinterpret_cast<const void*>(a.commGetAsyncError), "ncclCommGetAsyncError"}})
    if (!fn)
      throw Error(ErrorCode::Config, "NCCL " + lib->versionText() + " at " + lib->path() + " has no " + name +
                                         " (nccl_fallback_library needs NCCL 2.4 or later)");
  loaded = lib;
  loadedRequest = request;
  return loaded;
}

/// Every rank's "library set?" flag; throws unless all agree. True when all set it.
bool everyRankSetsIt(bool mine, Bootstrap& boot) {
  std::vector<int> all(static_cast<size_t>(boot.size()));
  all[static_cast<size_t>(boot.rank())] = mine ? 1 : 0;
  boot.allGather(all.data(), sizeof(int));
  std::string with, without;
  for (size_t r = 0; r < all.size(); ++r) {
    std::string& list = all[r] ? with : without;
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!with.empty() && !without.empty())
    throw Error(ErrorCode::Config, "nccl_fallback_library is set on ranks " + with + " but not on ranks " + without +
                                       ": every rank of a communicator must name a real NCCL, or none");
  return !with.empty();
}

}  // namespace

std::unique_ptr<RealNcclComm> RealNcclComm::join(const Config& config, Bootstrap& boot) {
  const std::string request = config.getString("nccl_fallback_library");
  const FallbackCalls calls = FallbackCalls::parse(config.getString("nccl_fallback_calls"));
  if (!everyRankSetsIt(!request.empty(), boot)) {
    if (!calls.empty())
      throw Error(ErrorCode::Config, "nccl_fallback_calls = '" + calls.describe() +
                                         "' names calls for a real NCCL, but nccl_fallback_library is empty");
    return nullptr;
  }
  const int rank = boot.rank(), nranks = boot.size();
  PB_LOG(Info, "NCCL", "rank " << rank << ": loading the real NCCL (nccl_fallback_library = " << request << ")");
  std::unique_ptr<RealNcclComm> real(new RealNcclComm(processLibrary(request, rank), calls, rank));
  PB_LOG(Info, "NCCL", "rank " << rank << ": loaded NCCL " << real->lib_->versionText() << " from " << real->lib_->path());
  std::vector<nccl::UniqueId> ids(static_cast<size_t>(nranks));
  if (rank == 0) real->check(real->api().getUniqueId(&ids[0]), "ncclGetUniqueId (real NCCL)");
  boot.allGather(ids.data(), sizeof(nccl::UniqueId));
  PB_LOG(Info, "NCCL", "rank " << rank << ": joining the real NCCL communicator");
  real->check(real->api().commInitRank(&real->comm_, nranks, ids[0], rank), "ncclCommInitRank (real NCCL)");
  PB_LOG(Info, "NCCL", "rank " << rank << ": real NCCL " << real->lib_->versionText() << " from "
                                  << real->lib_->path() << " joined beside Plugboard; handed to it: " << calls.describe());
  return real;
}

RealNcclComm::RealNcclComm(std::shared_ptr<NcclLibrary> lib, FallbackCalls calls, int rank)
    : lib_(std::move(lib)), calls_(calls), rank_(rank) {}

RealNcclComm::~RealNcclComm() {
  if (!comm_) return;
  const nccl::Result r = api().commDestroy(comm_);
  if (r != 0) PB_LOG(Warn, "NCCL", "rank " << rank_ << ": real NCCL's ncclCommDestroy failed: " << api().getErrorString(r));
}

void RealNcclComm::check(nccl::Result r, const char* call) const {
  if (r == 0) return;
  const char* last = api().getLastError ? api().getLastError(comm_) : nullptr;
  throw ApiFailure(static_cast<Result>(r), std::string(call) + " in the real NCCL " + lib_->versionText() + " (" +
                                               lib_->path() + ") failed on rank " + std::to_string(rank_) + ": " +
                                               api().getErrorString(r) + (last && *last ? std::string(": ") + last : ""));
}

void RealNcclComm::finalize() {
  if (comm_ && api().commFinalize) check(api().commFinalize(comm_), "ncclCommFinalize");
}

void RealNcclComm::abort() {
  if (!comm_) return;
  const nccl::Result r = api().commAbort(comm_);
  comm_ = nullptr;
  if (r != 0) PB_LOG(Warn, "NCCL", "rank " << rank_ << ": real NCCL's ncclCommAbort failed: " << api().getErrorString(r));
}

std::optional<Error> RealNcclComm::asyncError() const {
  if (!comm_) return std::nullopt;
  nccl::Result state = 0;
  const nccl::Result r = api().commGetAsyncError(comm_, &state);
  if (r == 0 && (state == 0 || state == ncclInProgress)) return std::nullopt;
  const nccl::Result bad = r != 0 ? r : state;
  return Error(ErrorCode::Remote, "rank " + std::to_string(rank_) + ": the real NCCL's communicator reports: " +
                                      api().getErrorString(bad));
}

namespace {

/// Throws ApiFailure with the real NCCL's code unless r is ncclSuccess.
void checkGroupCall(const NcclApi& api, nccl::Result r, const char* call) {
  if (r == 0) return;
  const char* last = api.getLastError ? api.getLastError(nullptr) : nullptr;
  throw ApiFailure(static_cast<Result>(r), std::string(call) + " failed in the real NCCL: " + api.getErrorString(r) +
                                               (last && *last ? std::string(": ") + last : ""));
}

}  // namespace

RealNcclGroup::RealNcclGroup(const NcclApi* api) : api_(api) {
  if (api_) checkGroupCall(*api_, api_->groupStart(), "ncclGroupStart");
}

RealNcclGroup::~RealNcclGroup() {
  if (api_) api_->groupEnd();
}

void RealNcclGroup::end() {
  const NcclApi* api = api_;
  api_ = nullptr;
  if (api) checkGroupCall(*api, api->groupEnd(), "ncclGroupEnd");
}

}  // namespace plugboard::ncclapi
