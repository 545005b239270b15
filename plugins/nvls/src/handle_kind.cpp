#include "handle_kind.hpp"

#include "error.hpp"

namespace plugboard::nvls {

HandlePreference parseHandlePreference(const std::string& text) {
  if (text == "auto" || text.empty()) return HandlePreference::Auto;
  if (text == "fabric") return HandlePreference::Fabric;
  if (text == "posix_fd") return HandlePreference::PosixFd;
  throw Error(PB_ERR_INVALID, "nvls: handle_type '" + text + "' is not one of auto, fabric, posix_fd");
}

const char* preferenceName(HandlePreference preference) {
  switch (preference) {
    case HandlePreference::Fabric: return "fabric";
    case HandlePreference::PosixFd: return "posix_fd";
    case HandlePreference::Auto: break;
  }
  return "auto";
}

const char* kindName(HandleKind kind) { return kind == HandleKind::Fabric ? "fabric" : "posix_fd"; }

CUmemAllocationHandleType cuHandleType(HandleKind kind) {
  return kind == HandleKind::Fabric ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

namespace {

/// True when rank r's GPU can export kind.
bool supports(const HandleSupport& r, HandleKind kind) { return kind == HandleKind::Fabric ? r.fabric : r.posixFd; }

/// The first rank that cannot export kind, or -1.
int firstLacking(const std::vector<HandleSupport>& ranks, HandleKind kind) {
  for (size_t i = 0; i < ranks.size(); ++i)
    if (!supports(ranks[i], kind)) return static_cast<int>(i);
  return -1;
}

/// The kind the settings demand (Auto when none names one); throws when two ranks name different kinds.
HandlePreference demanded(const std::vector<HandleSupport>& ranks, const std::function<std::string(int)>& describe) {
  int first = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].preference == HandlePreference::Auto) continue;
    if (first < 0) {
      first = static_cast<int>(i);
    } else if (ranks[i].preference != ranks[first].preference) {
      throw Error(PB_ERR_INVALID, "nvls: the ranks disagree on handle_type: " + describe(first) + " says " +
                                      preferenceName(ranks[first].preference) + ", " +
                                      describe(static_cast<int>(i)) + " says " +
                                      preferenceName(ranks[i].preference));
    }
  }
  return first < 0 ? HandlePreference::Auto : ranks[first].preference;
}

}  // namespace

HandleKind chooseHandleKind(const std::vector<HandleSupport>& ranks,
                            const std::function<std::string(int)>& describe) {
  const HandlePreference want = demanded(ranks, describe);
  if (want != HandlePreference::Auto) {
    const HandleKind kind = want == HandlePreference::Fabric ? HandleKind::Fabric : HandleKind::PosixFd;
    const int lacking = firstLacking(ranks, kind);
    NVLS_CHECK(lacking < 0, PB_ERR_UNSUPPORTED,
               std::string("nvls: handle_type=") + kindName(kind) + " but the GPU of " + describe(lacking) +
                   " cannot export " + kindName(kind) + " handles");
    return kind;
  }
  const int noFabric = firstLacking(ranks, HandleKind::Fabric);
  if (noFabric < 0) return HandleKind::Fabric;
  const int noFd = firstLacking(ranks, HandleKind::PosixFd);
  NVLS_CHECK(noFd < 0, PB_ERR_UNSUPPORTED,
             "nvls: no handle kind works on every rank: the GPU of " + describe(noFabric) +
                 " cannot export fabric handles and the GPU of " + describe(noFd) + " cannot export POSIX fds");
  return HandleKind::PosixFd;
}

}  // namespace plugboard::nvls
