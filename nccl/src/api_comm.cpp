// The communicator entry points of nccl.h: versions and ids, init, split,
// finalize, destroy, abort and the queries.
#include <algorithm>
#include <cstddef>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "api_util.hpp"
#include "group.hpp"
#include "nccl_comm.hpp"

using namespace plugboard;
using namespace plugboard::ncclapi;

namespace {

/// Bootstrap tags of ncclCommSplit's and ncclCommShrink's unique-id hand-outs.
constexpr int kSplitTag = 0x4e43434c;   // "NCCL"
constexpr int kShrinkTag = 0x4e43534b;  // "NCSK"

UniqueId toUniqueId(const ncclUniqueId& id) {
  UniqueId u;
  static_assert(sizeof(u.bytes) == sizeof(id.internal), "unique ids are 128 bytes in both APIs");
  std::memcpy(u.bytes.data(), id.internal, sizeof(id.internal));
  return u;
}

/// Checks init's arguments and that a device is current; returns it.
int checkInit(ncclComm_t* comm, int nranks, int rank) {
  requireArg(comm, "comm");
  if (nranks < 1) throw ApiFailure(Result::InvalidArgument, "nranks " + std::to_string(nranks) + " is not positive");
  if (rank < 0 || rank >= nranks)
    throw ApiFailure(Result::InvalidArgument, "rank " + std::to_string(rank) + " is out of range [0, " +
                                                  std::to_string(nranks) + ")");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw ApiFailure(Result::UnhandledCudaError, "rank " + std::to_string(rank) + ": no CUDA device is visible");
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) throw ApiFailure(Result::UnhandledCudaError, "cudaGetDevice failed");
  return device;
}

/// Makes this rank's communicator of parent's ranks `oldRanks` (in their
/// new order; this rank among them): the first hands a fresh unique id to
/// the others through the parent's bootstrap, point to point (ranks outside
/// oldRanks take no part), then they initialise together, on a thread of
/// their own when nonBlocking (the caller answers ncclInProgress).
ncclComm* joinMembers(ncclComm_t parent, const std::vector<int>& oldRanks, int tag, const char* call, bool nonBlocking) {
  Bootstrap& boot = parent->comm->bootstrap();
  const int me = parent->rank();
  const int newRank = static_cast<int>(std::find(oldRanks.begin(), oldRanks.end(), me) - oldRanks.begin());
  UniqueId id;
  if (newRank == 0) {
    id = TcpBootstrap::createUniqueId();
    for (size_t i = 1; i < oldRanks.size(); ++i) boot.send(id.bytes.data(), id.bytes.size(), oldRanks[i], tag);
  } else {
    const std::vector<char> got = boot.recv(oldRanks[0], tag);
    if (got.size() != id.bytes.size())
      throw Error(ErrorCode::Remote, std::string(call) + ": a unique id of the wrong size arrived from rank " +
                                         std::to_string(oldRanks[0]));
    std::memcpy(id.bytes.data(), got.data(), got.size());
  }
  if (cudaSetDevice(parent->device) != cudaSuccess) throw Error(ErrorCode::System, "cudaSetDevice failed");
  if (nonBlocking) return ncclComm::startNonBlocking(newRank, static_cast<int>(oldRanks.size()), id);
  return new ncclComm(newRank, static_cast<int>(oldRanks.size()), id);
}


/// The parent's ranks left after excluding `list` (count entries), in
/// order; ApiFailure(InvalidArgument) for a bad list or when the caller
/// itself is excluded (excluded ranks do not call ncclCommShrink).
std::vector<int> shrinkSurvivors(int n, int me, const int* list, int count) {
  if (count < 0 || (count > 0 && !list))
    throw ApiFailure(Result::InvalidArgument, "excludeRanksList must hold excludeRanksCount (" + std::to_string(count) +
                                                  ") ranks");
  std::vector<bool> excluded(static_cast<size_t>(n), false);
  for (int i = 0; i < count; ++i) {
    const int r = list[i];
    if (r < 0 || r >= n)
      throw ApiFailure(Result::InvalidArgument, "excludeRanksList[" + std::to_string(i) + "] = " + std::to_string(r) +
                                                    " is not a rank of the communicator (0.." + std::to_string(n - 1) + ")");
    if (excluded[r])
      throw ApiFailure(Result::InvalidArgument, "excludeRanksList names rank " + std::to_string(r) + " twice");
    excluded[r] = true;
  }
  if (excluded[me])
    throw ApiFailure(Result::InvalidArgument, "rank " + std::to_string(me) +
                                                  " is in excludeRanksList: excluded ranks do not call ncclCommShrink");
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r)
    if (!excluded[r]) survivors.push_back(r);
  return survivors;
}

/// Creates a rank now, starts it on a thread of its own (nonBlocking: true
/// returned, the caller answers ncclInProgress), or records it for the open
/// group's end (a group's inits complete in ncclGroupEnd).
bool initRank(ncclComm_t* comm, int nranks, const UniqueId& id, int rank, bool nonBlocking = false) {
  const int device = checkInit(comm, nranks, rank);
  Group& g = Group::current();
  *comm = nullptr;
  if (g.open()) {
    g.inits.push_back({comm, nranks, id, rank, device, nonBlocking});
    return false;
  }
  if (nonBlocking) {
    *comm = ncclComm::startNonBlocking(rank, nranks, id);
    return true;
  }
  *comm = new ncclComm(rank, nranks, id);
  return false;
}

/// Config fields this library reads, if the caller's struct has them;
/// true for config.blocking = 0.
bool readConfig(const ncclConfig_t* config) {
  if (!config) return false;
  if (config->magic != 0xcafebeef)
    throw ApiFailure(Result::InvalidArgument, "config was not initialised with NCCL_CONFIG_INITIALIZER (bad magic)");
  return config->size >= offsetof(ncclConfig_t, blocking) + sizeof(int) && config->blocking == 0;
}

/// Whether a split or shrink of parent with this config sets up in the
/// background: config.blocking = 0, or no config and a non-blocking parent.
bool childNonBlocking(const ncclComm* parent, const ncclConfig_t* config) {
  return config ? readConfig(config) : parent->nonBlocking;
}

/// How long ncclCommDestroy waits for the teardown before letting it finish alone.
constexpr auto kDestroyWait = std::chrono::seconds(1);

/// Frees comm on a thread of its own, waiting for it at most kDestroyWait:
/// the teardown ends in a barrier with the other ranks, and a program that
/// destroys several ranks' communicators from one thread (ncclCommInitAll)
/// must not wait there for a rank it has not destroyed yet.
void destroyInBackground(ncclComm* comm) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  // A non-blocking set-up that failed (or still runs) has no communicator to ask.
  const std::string who = comm->initState() == ncclComm::InitState::Ready ? "rank " + std::to_string(comm->rank())
                                                                          : std::string("a rank");
  std::thread([comm, done] {
    cudaSetDevice(comm->device);
    delete comm;  // noexcept: failures are logged by the core
    done->set_value();
  }).detach();
  if (finished.wait_for(kDestroyWait) == std::future_status::timeout)
    PB_LOG(Info, "NCCL", "ncclCommDestroy: " << who << " waits for its peers to destroy theirs (or for its "
                                                 "non-blocking init); the teardown finishes in the background");
}

}  // namespace

PB_NCCL_API ncclResult_t ncclGetVersion(int* version) {
  return guarded("ncclGetVersion", [&] {
    requireArg(version, "version");
    *version = NCCL_VERSION_CODE;
  });
}

PB_NCCL_API ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  return guarded("ncclGetUniqueId", [&] {
    requireArg(uniqueId, "uniqueId");
    const UniqueId id = TcpBootstrap::createUniqueId();
    std::memcpy(uniqueId->internal, id.bytes.data(), sizeof(uniqueId->internal));
  });
}

PB_NCCL_API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return guarded("ncclCommInitRank", [&] { initRank(comm, nranks, toUniqueId(commId), rank); });
}

// config.blocking = 0 outside a group: ncclInProgress at once, the set-up
// on a thread of its own; ncclCommGetAsyncError answers ncclInProgress
// until it is done.
PB_NCCL_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                ncclConfig_t* config) {
  bool pending = false;
  const ncclResult_t r = guarded("ncclCommInitRankConfig", [&] {
    pending = initRank(comm, nranks, toUniqueId(commId), rank, readConfig(config));
  });
  return r == ncclSuccess && pending ? ncclInProgress : r;
}

PB_NCCL_API ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                  ncclUniqueId* commIds, ncclConfig_t* config) {
  bool pending = false;
  const ncclResult_t r = guarded("ncclCommInitRankScalable", [&] {
    if (nId < 1 || !commIds) throw ApiFailure(Result::InvalidArgument, "commIds must hold at least one id");
    pending = initRank(newcomm, nranks, toUniqueId(commIds[0]), myrank, readConfig(config));
  });
  return r == ncclSuccess && pending ? ncclInProgress : r;
}

PB_NCCL_API ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  return guarded("ncclCommInitAll", [&] {
    requireArg(comm, "comm");
    if (ndev < 1) throw ApiFailure(Result::InvalidArgument, "ndev " + std::to_string(ndev) + " is not positive");
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      throw ApiFailure(Result::UnhandledCudaError, "no CUDA device is visible");
    const UniqueId id = TcpBootstrap::createUniqueId();
    Group& g = Group::current();
    ++g.depth;  // the ranks must join at once: one group of ndev inits
    for (int i = 0; i < ndev; ++i) {
      const int device = devlist ? devlist[i] : i;
      if (device < 0 || device >= devices)
        throw ApiFailure(Result::InvalidArgument, "devlist[" + std::to_string(i) + "] = " + std::to_string(device) +
                                                      " is not a device (" + std::to_string(devices) + " visible)");
      g.inits.push_back({&comm[i], ndev, id, i, device});
    }
    if (--g.depth == 0) g.issue();
  });
}

// With config.blocking = 0 (or no config and a non-blocking parent) the
// colors are exchanged and the new communicator's id handed out before
// returning; its set-up runs on a thread of its own and the call answers
// ncclInProgress (NOCOLOR ranks: ncclSuccess and NULL).
PB_NCCL_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  bool pending = false;
  const ncclResult_t r = guarded("ncclCommSplit", [&] {
    requireComm(comm);
    requireArg(newcomm, "newcomm");
    if (color < NCCL_SPLIT_NOCOLOR)
      throw ApiFailure(Result::InvalidArgument, "color " + std::to_string(color) + " is negative (only NCCL_SPLIT_NOCOLOR is)");
    const bool nonBlocking = childNonBlocking(comm, config);
    *newcomm = nullptr;
    Bootstrap& boot = comm->comm->bootstrap();
    const int n = comm->size(), me = comm->rank();
    std::vector<int> all(2 * n);
    all[2 * me] = color;
    all[2 * me + 1] = key;
    boot.allGather(all.data(), 2 * sizeof(int));
    if (color == NCCL_SPLIT_NOCOLOR) return;
    std::vector<std::tuple<int, int>> members;  // (key, old rank) of my color
    for (int r = 0; r < n; ++r)
      if (all[2 * r] == color) members.emplace_back(all[2 * r + 1], r);
    std::sort(members.begin(), members.end());
    std::vector<int> oldRanks;
    for (const auto& m : members) oldRanks.push_back(std::get<1>(m));
    *newcomm = joinMembers(comm, oldRanks, kSplitTag, "ncclCommSplit", nonBlocking);
    pending = nonBlocking;
  });
  return r == ncclSuccess && pending ? ncclInProgress : r;
}

PB_NCCL_API ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                        ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  bool pending = false;
  const ncclResult_t r = guarded("ncclCommShrink", [&] {
    requireComm(comm);
    requireArg(newcomm, "newcomm");
    *newcomm = nullptr;
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
      throw ApiFailure(Result::InvalidArgument, "shrinkFlags " + std::to_string(shrinkFlags) +
                                                    " is neither NCCL_SHRINK_DEFAULT nor NCCL_SHRINK_ABORT");
    const std::vector<int> survivors = shrinkSurvivors(comm->size(), comm->rank(), excludeRanksList, excludeRanksCount);
    const bool nonBlocking = childNonBlocking(comm, config);
    if (shrinkFlags == NCCL_SHRINK_ABORT) {  // end the parent's waits; its bootstrap still serves new calls
      if (comm->real) comm->real->abort();
      comm->comm->abort();
    }
    *newcomm = joinMembers(comm, survivors, kShrinkTag, "ncclCommShrink", nonBlocking);
    pending = nonBlocking;
  });
  return r == ncclSuccess && pending ? ncclInProgress : r;
}

PB_NCCL_API ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return guarded("ncclCommFinalize", [&] {
    requireComm(comm);
    comm->finalize();
  });
}

PB_NCCL_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return guarded("ncclCommDestroy", [&] {
    if (!comm) return;  // NCCL accepts a NULL comm here
    destroyInBackground(comm);
  });
}

PB_NCCL_API ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return guarded("ncclCommAbort", [&] {
    if (comm) comm->abortAndFree();
  });
}

PB_NCCL_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return guarded("ncclCommGetAsyncError", [&] {
    if (!comm) throw ApiFailure(Result::InvalidArgument, "comm is NULL");
    requireArg(asyncError, "asyncError");
    if (comm->initState() == ncclComm::InitState::InProgress) {
      *asyncError = ncclInProgress;
      return;
    }
    if (comm->initState() == ncclComm::InitState::Failed) {
      *asyncError = fail(static_cast<Result>(comm->initResult()),
                         "ncclCommGetAsyncError: the communicator's non-blocking init failed: " + comm->initError());
      return;
    }
    *asyncError = ncclSuccess;
    try {
      comm->gpu->checkErrors();
      if (auto e = comm->comm->asyncError()) throw *e;
      if (comm->real)
        if (auto e = comm->real->asyncError()) throw *e;
    } catch (const Error& e) {
      *asyncError = fail(resultFor(e.code()), std::string("ncclCommGetAsyncError: ") + e.what());
    }
  });
}

PB_NCCL_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return guarded("ncclCommCount", [&] {
    requireComm(comm);
    requireArg(count, "count");
    *count = comm->size();
  });
}

PB_NCCL_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return guarded("ncclCommCuDevice", [&] {
    requireComm(comm);
    requireArg(device, "device");
    *device = comm->device;
  });
}

PB_NCCL_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return guarded("ncclCommUserRank", [&] {
    requireComm(comm);
    requireArg(rank, "rank");
    *rank = comm->rank();
  });
}

PB_NCCL_API const char* ncclGetErrorString(ncclResult_t result) { return resultText(static_cast<Result>(result)); }

PB_NCCL_API const char* ncclGetLastError(ncclComm_t) { return lastErrorText(); }
