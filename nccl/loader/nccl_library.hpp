// A real NCCL, loaded at run time with dlopen (never linked): the C API
// types and functions that plugboard-perf (--compare nccl) and the NCCL API
// library's fallback (nccl_fallback_library) call, declared here from
// NCCL's public API, and the search for libnccl.so.2.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace plugboard {

/// NCCL's C types, as its public header declares them (enums are int-sized).
namespace nccl {
/// ncclUniqueId: 128 opaque bytes, made on one rank and given to all.
struct UniqueId {
  char internal[128];  ///< Opaque.
};
static_assert(sizeof(UniqueId) == 128, "ncclUniqueId is 128 bytes");
struct CommOpaque;           ///< ncclComm (never defined here).
using Comm = CommOpaque*;    ///< ncclComm_t.
using Result = int;          ///< ncclResult_t; 0 is ncclSuccess.
using Stream = void*;        ///< cudaStream_t (a pointer; kept opaque so this header needs no CUDA).
struct WindowOpaque;         ///< ncclWindow_vidmem (never defined here).
using Window = WindowOpaque*;  ///< ncclWindow_t (NCCL 2.27 and later).
/// ncclCommWindowRegister flag: a window every rank registers with the same size, for NCCL's symmetric kernels.
constexpr int kWinCollSymmetric = 0x01;
/// ncclDataType_t values.
enum DataType : int { Int8 = 0, Uint8 = 1, Int32 = 2, Uint32 = 3, Int64 = 4, Uint64 = 5, Float16 = 6, Float32 = 7, Float64 = 8, BFloat16 = 9, Float8E4M3 = 10, Float8E5M2 = 11 };
/// ncclRedOp_t values (Avg since NCCL 2.10).
enum RedOp : int { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4 };
/// ncclScalarResidence_t: ncclRedOpCreatePreMulSum's scalar is read from the host at creation.
constexpr int kScalarHostImmediate = 1;
}  // namespace nccl

/// The NCCL functions plugboard-perf uses, resolved from the library.
struct NcclApi {
  nccl::Result (*getVersion)(int* version) = nullptr;                     ///< ncclGetVersion
  const char* (*getErrorString)(nccl::Result result) = nullptr;           ///< ncclGetErrorString
  nccl::Result (*getUniqueId)(nccl::UniqueId* id) = nullptr;              ///< ncclGetUniqueId
  nccl::Result (*commInitRank)(nccl::Comm* comm, int nranks, nccl::UniqueId id, int rank) = nullptr;  ///< ncclCommInitRank
  nccl::Result (*commDestroy)(nccl::Comm comm) = nullptr;                 ///< ncclCommDestroy
  // Optional (null where the library lacks them); the NCCL API library's fallback requires the first three.
  nccl::Result (*commAbort)(nccl::Comm comm) = nullptr;                                ///< ncclCommAbort
  nccl::Result (*commFinalize)(nccl::Comm comm) = nullptr;                             ///< ncclCommFinalize
  nccl::Result (*commGetAsyncError)(nccl::Comm comm, nccl::Result* asyncError) = nullptr;  ///< ncclCommGetAsyncError
  const char* (*getLastError)(nccl::Comm comm) = nullptr;                              ///< ncclGetLastError
  /// ncclRedOpCreatePreMulSum (residence: nccl::kScalarHostImmediate or device)
  nccl::Result (*redOpCreatePreMulSum)(int* op, void* scalar, int type, int residence, nccl::Comm comm) = nullptr;
  nccl::Result (*redOpDestroy)(int op, nccl::Comm comm) = nullptr;  ///< ncclRedOpDestroy
  /// ncclAlltoAll (NCCL 2.28 and later)
  nccl::Result (*allToAll)(const void* send, void* recv, size_t count, int type, nccl::Comm comm, nccl::Stream s) = nullptr;
  /// ncclAllReduce
  nccl::Result (*allReduce)(const void* send, void* recv, size_t count, int type, int op, nccl::Comm comm, nccl::Stream s) = nullptr;
  /// ncclAllGather (count: elements each rank sends)
  nccl::Result (*allGather)(const void* send, void* recv, size_t sendCount, int type, nccl::Comm comm, nccl::Stream s) = nullptr;
  /// ncclReduceScatter (count: elements each rank receives)
  nccl::Result (*reduceScatter)(const void* send, void* recv, size_t recvCount, int type, int op, nccl::Comm comm, nccl::Stream s) = nullptr;
  /// ncclBroadcast
  nccl::Result (*broadcast)(const void* send, void* recv, size_t count, int type, int root, nccl::Comm comm, nccl::Stream s) = nullptr;
  /// ncclReduce
  nccl::Result (*reduce)(const void* send, void* recv, size_t count, int type, int op, int root, nccl::Comm comm, nccl::Stream s) = nullptr;
  /// ncclSend
  nccl::Result (*send)(const void* buf, size_t count, int type, int peer, nccl::Comm comm, nccl::Stream s) = nullptr;
  /// ncclRecv
  nccl::Result (*recv)(void* buf, size_t count, int type, int peer, nccl::Comm comm, nccl::Stream s) = nullptr;
  nccl::Result (*groupStart)() = nullptr;  ///< ncclGroupStart
  nccl::Result (*groupEnd)() = nullptr;    ///< ncclGroupEnd
  // Optional (null where the library lacks them): symmetric memory, NCCL 2.27 and later.
  nccl::Result (*memAlloc)(void** ptr, size_t size) = nullptr;  ///< ncclMemAlloc
  nccl::Result (*memFree)(void* ptr) = nullptr;                 ///< ncclMemFree
  /// ncclCommWindowRegister (collective)
  nccl::Result (*commWindowRegister)(nccl::Comm comm, void* buff, size_t size, nccl::Window* win, int flags) = nullptr;
  /// ncclCommWindowDeregister (collective)
  nccl::Result (*commWindowDeregister)(nccl::Comm comm, nccl::Window win) = nullptr;
  /// True when every symmetric-memory function above was found.
  bool hasWindows() const { return memAlloc && memFree && commWindowRegister && commWindowDeregister; }
};

/// One attempt of the search and why it did not give a library.
struct NcclAttempt {
  std::string path;    ///< What was given to dlopen (or the glob pattern).
  std::string reason;  ///< Empty when it loaded; else the dlerror() text or "no such file".
};

/// How a caller loads NCCL: what its errors tell the user to change, and
/// which library to refuse.
struct NcclLoadRules {
  /// How the user names a library, for errors ("--nccl-lib PATH or PLUGBOARD_NCCL_LIB").
  std::string remedy = "--nccl-lib PATH or PLUGBOARD_NCCL_LIB";
  /// What the library is for, in the search failure ("--compare nccl").
  std::string purpose = "--compare nccl";
  /// A library whose ncclGetVersion is this function is refused (the
  /// search goes on to the next candidate): the NCCL API library passes its
  /// own, since "libnccl.so.2" through the dynamic linker may be itself.
  const void* refuseVersionFunction = nullptr;
  /// RTLD_DEEPBIND: the library binds its own symbols first (a real NCCL
  /// loaded beside the NCCL API library must not call into ours).
  bool deepBind = false;
};

/// A loaded NCCL: the dlopen handle (kept for the life of the process, so a
/// forked rank inherits it), its functions, its path and version.
class NcclLibrary {
 public:
  /// Loads NCCL. A non-empty `path` is the only file tried (`source` names
  /// where it came from: "--nccl-lib" or "PLUGBOARD_NCCL_LIB"); otherwise
  /// ncclSearchPaths() in order, first that loads wins. Throws Error(Config)
  /// listing every path tried with its reason, or naming a missing symbol.
  static std::shared_ptr<NcclLibrary> load(const std::string& path, const std::string& source,
                                           const NcclLoadRules& rules = {});
  /// The default search over `candidates` (load("") passes ncclSearchPaths()):
  /// the first that loads wins; else Error(Config) listing each with its reason.
  static std::shared_ptr<NcclLibrary> loadFirstOf(const std::vector<std::string>& candidates,
                                                  const NcclLoadRules& rules = {});

  /// The resolved functions.
  const NcclApi& api() const { return api_; }
  /// The file that was loaded (as the dynamic linker resolved it).
  const std::string& path() const { return path_; }
  /// ncclGetVersion's code, e.g. 22105.
  int versionCode() const { return version_; }
  /// "2.21.5".
  std::string versionText() const;
  /// Throws Error(Config) naming `flag`, this library's version and path
  /// unless it has the symmetric-window functions (NCCL 2.27 and later).
  void requireWindows(const std::string& flag) const;
  /// Throws Error(Remote) "NCCL <what> failed: <ncclGetErrorString>" unless r is ncclSuccess.
  void check(nccl::Result r, const std::string& what) const;
  /// The same for a literal name: builds no string unless r failed (a
  /// benchmark times the calls it checks).
  void check(nccl::Result r, const char* what) const {
    if (r != 0) check(r, std::string(what));
  }

 private:
  NcclLibrary() = default;
  /// Resolves every function and reads the version; throws Error(Config) naming a missing symbol.
  static std::shared_ptr<NcclLibrary> fromHandle(void* handle, const std::string& opened);
  /// dlopen()s one candidate under rules; on failure (or a refused
  /// library) records why in tried and returns null.
  static void* tryOpen(const std::string& path, const NcclLoadRules& rules, std::vector<NcclAttempt>& tried);
  void* handle_ = nullptr;
  NcclApi api_;
  std::string path_;
  int version_ = 0;
};

/// The default search, in order: "libnccl.so.2" through the dynamic linker,
/// then <site-packages>/nvidia/nccl/lib/libnccl.so.2 for every site-packages
/// directory python3 reports (and where `import nvidia.nccl` points), then
/// common install prefixes (virtualenv, conda, /usr, /usr/local, ~/.local)
/// and /usr/local/cuda/lib64. Duplicates removed; files need not exist.
std::vector<std::string> ncclSearchPaths();

/// The explicit library request: --nccl-lib if given, else $PLUGBOARD_NCCL_LIB,
/// else empty. `source` receives the flag or variable name.
std::string ncclLibraryRequest(const std::string& optionValue, std::string* source);

}  // namespace plugboard
