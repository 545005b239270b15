#include "nccl_library.hpp"

#include <dlfcn.h>
#include <glob.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "plugboard/error.hpp"

namespace plugboard {
namespace {

constexpr const char* kSoname = "libnccl.so.2";
constexpr const char* kWheelTail = "/nvidia/nccl/lib/libnccl.so.2";

// Prints one candidate file per line: where `import nvidia.nccl` points,
// then every site-packages directory and sys.path entry. Errors are ignored
// (no wheel installed is the common case).
constexpr const char* kPythonProbe =
    "import os, sys, site\n"
    "out = []\n"
    "try:\n"
    "    import nvidia.nccl as m\n"
    "    dirs = list(getattr(m, '__path__', []))\n"
    "    if getattr(m, '__file__', None): dirs.append(os.path.dirname(m.__file__))\n"
    "    out += [os.path.join(d, 'lib', 'libnccl.so.2') for d in dirs]\n"
    "except Exception:\n"
    "    pass\n"
    "roots = []\n"
    "try: roots += site.getsitepackages()\n"
    "except Exception: pass\n"
    "try: roots.append(site.getusersitepackages())\n"
    "except Exception: pass\n"
    "roots += [p for p in sys.path if p]\n"
    "out += [os.path.join(r, 'nvidia', 'nccl', 'lib', 'libnccl.so.2') for r in roots]\n"
    "print('\\n'.join(out))\n";

/// Lines python3 prints for kPythonProbe; empty when python3 is missing or fails.
std::vector<std::string> pythonCandidates() {
  std::string cmd = "python3 -c \"$PLUGBOARD_NCCL_PROBE\" 2>/dev/null";
  setenv("PLUGBOARD_NCCL_PROBE", kPythonProbe, 1);  // passed by environment: no shell quoting of the script
  std::vector<std::string> lines;
  FILE* p = popen(cmd.c_str(), "r");
  unsetenv("PLUGBOARD_NCCL_PROBE");
  if (!p) return lines;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), p)) {
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (!line.empty() && line[0] == '/') lines.push_back(line);
  }
  pclose(p);
  return lines;
}

/// Files matching the common site-packages layouts under the usual prefixes.
std::vector<std::string> scannedCandidates() {
  std::vector<std::string> prefixes;
  for (const char* v : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* p = std::getenv(v)) prefixes.push_back(p);
  if (const char* home = std::getenv("HOME")) prefixes.push_back(std::string(home) + "/.local");
  for (const char* p : {"/usr/local", "/usr", "/opt/conda"}) prefixes.push_back(p);
  std::vector<std::string> out;
  for (const auto& prefix : prefixes)
    for (const char* dir : {"/lib/python3*/site-packages", "/lib/python3*/dist-packages", "/lib/python3/dist-packages"}) {
      std::string pattern = prefix + dir + kWheelTail;
      glob_t g{};
      if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
      globfree(&g);
    }
  out.push_back("/usr/local/cuda/lib64/libnccl.so.2");
  return out;
}

std::string lastDlError() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

std::string triedList(const std::vector<NcclAttempt>& tried) {
  std::string s;
  for (const auto& t : tried) s += "\n  " + t.path + ": " + t.reason;
  return s;
}

template <typename F>
void resolve(void* handle, const char* name, F& fn, const std::string& path) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!fn) throw Error(ErrorCode::Config, "NCCL library " + path + " has no symbol " + name + " (not NCCL 2.x?)");
}

/// Like resolve(), but leaves fn null where the library lacks the symbol.
template <typename F>
void resolveOptional(void* handle, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
}

/// The file the dynamic linker actually opened for handle.
std::string loadedPath(void* symbol, const std::string& fallback) {
  Dl_info info{};
  if (dladdr(symbol, &info) && info.dli_fname) return info.dli_fname;
  return fallback;
}

}  // namespace

std::vector<std::string> ncclSearchPaths() {
  std::vector<std::string> all{kSoname};
  for (auto& p : pythonCandidates()) all.push_back(p);
  for (auto& p : scannedCandidates()) all.push_back(p);
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (auto& p : all)
    if (seen.insert(p).second) unique.push_back(p);
  return unique;
}

std::string ncclLibraryRequest(const std::string& optionValue, std::string* source) {
  if (!optionValue.empty()) {
    *source = "--nccl-lib";
    return optionValue;
  }
  const char* env = std::getenv("PLUGBOARD_NCCL_LIB");
  if (env && *env) {
    *source = "PLUGBOARD_NCCL_LIB";
    return env;
  }
  source->clear();
  return "";
}

void* NcclLibrary::tryOpen(const std::string& path, const NcclLoadRules& rules, std::vector<NcclAttempt>& tried) {
  bool isPath = path.find('/') != std::string::npos;
  if (isPath && access(path.c_str(), F_OK) != 0) {
    tried.push_back({path, "no such file"});
    return nullptr;
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | (rules.deepBind ? RTLD_DEEPBIND : 0));
  const std::string shown = isPath ? path : path + " (dynamic linker search)";
  if (!h) {
    tried.push_back({shown, lastDlError()});
    return nullptr;
  }
  if (rules.refuseVersionFunction && dlsym(h, "ncclGetVersion") == rules.refuseVersionFunction) {
    tried.push_back({shown, "is Plugboard's own NCCL API library, not a real NCCL"});
    dlclose(h);  // only drops the reference this dlopen took
    return nullptr;
  }
  tried.push_back({shown, ""});
  return h;
}

std::shared_ptr<NcclLibrary> NcclLibrary::load(const std::string& path, const std::string& source,
                                               const NcclLoadRules& rules) {
  if (path.empty()) return loadFirstOf(ncclSearchPaths(), rules);
  std::vector<NcclAttempt> tried;
  void* handle = tryOpen(path, rules, tried);
  if (!handle)
    throw Error(ErrorCode::Config, "NCCL library given by " + source + " cannot be loaded; tried:" + triedList(tried) +
                                       "\n  (fix " + rules.remedy + ", or unset it for the default search)");
  return fromHandle(handle, path);
}

std::shared_ptr<NcclLibrary> NcclLibrary::loadFirstOf(const std::vector<std::string>& candidates,
                                                      const NcclLoadRules& rules) {
  std::vector<NcclAttempt> tried;
  for (const auto& candidate : candidates)
    if (void* handle = tryOpen(candidate, rules, tried)) return fromHandle(handle, candidate);
  throw Error(ErrorCode::Config, "NCCL library not found (" + rules.purpose + "); tried:" + triedList(tried) +
                                     "\n  (name it with " + rules.remedy + ", or install NCCL, e.g. "
                                     "pip install nvidia-nccl-cu12)");
}

std::shared_ptr<NcclLibrary> NcclLibrary::fromHandle(void* handle, const std::string& opened) {
  std::shared_ptr<NcclLibrary> lib(new NcclLibrary());
  lib->handle_ = handle;  // never dlclose'd: NCCL keeps threads and state for the life of the process
  NcclApi& a = lib->api_;
  resolve(handle, "ncclGetVersion", a.getVersion, opened);
  lib->path_ = loadedPath(reinterpret_cast<void*>(a.getVersion), opened);
  const std::string& p = lib->path_;
  resolve(handle, "ncclGetErrorString", a.getErrorString, p);
  resolve(handle, "ncclGetUniqueId", a.getUniqueId, p);
  resolve(handle, "ncclCommInitRank", a.commInitRank, p);
  resolve(handle, "ncclCommDestroy", a.commDestroy, p);
  resolve(handle, "ncclAllReduce", a.allReduce, p);
  resolve(handle, "ncclAllGather", a.allGather, p);
  resolve(handle, "ncclReduceScatter", a.reduceScatter, p);
  resolve(handle, "ncclBroadcast", a.broadcast, p);
  resolve(handle, "ncclReduce", a.reduce, p);
  resolve(handle, "ncclSend", a.send, p);
  resolve(handle, "ncclRecv", a.recv, p);
  resolve(handle, "ncclGroupStart", a.groupStart, p);
  resolve(handle, "ncclGroupEnd", a.groupEnd, p);
  resolveOptional(handle, "ncclCommAbort", a.commAbort);
  resolveOptional(handle, "ncclCommFinalize", a.commFinalize);
  resolveOptional(handle, "ncclCommGetAsyncError", a.commGetAsyncError);
  resolveOptional(handle, "ncclRedOpCreatePreMulSum", a.redOpCreatePreMulSum);
  resolveOptional(handle, "ncclRedOpDestroy", a.redOpDestroy);
  resolveOptional(handle, "ncclGetLastError", a.getLastError);
  resolveOptional(handle, "ncclAlltoAll", a.allToAll);
  resolveOptional(handle, "ncclMemAlloc", a.memAlloc);
  resolveOptional(handle, "ncclMemFree", a.memFree);
  resolveOptional(handle, "ncclCommWindowRegister", a.commWindowRegister);
  resolveOptional(handle, "ncclCommWindowDeregister", a.commWindowDeregister);
  lib->check(a.getVersion(&lib->version_), "ncclGetVersion");
  return lib;
}

std::string NcclLibrary::versionText() const {
  int v = version_;
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch; older major*1000 + minor*100 + patch.
  int major = v >= 10000 ? v / 10000 : v / 1000;
  int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

void NcclLibrary::requireWindows(const std::string& flag) const {
  if (api_.hasWindows()) return;
  throw Error(ErrorCode::Config, flag + ": NCCL " + versionText() + " at " + path_ +
                                     " lacks ncclMemAlloc/ncclCommWindowRegister (symmetric windows need NCCL 2.27 or "
                                     "later; name a newer library with --nccl-lib)");
}

void NcclLibrary::check(nccl::Result r, const std::string& what) const {
  if (r == 0) return;
  const char* text = api_.getErrorString ? api_.getErrorString(r) : nullptr;
  throw Error(ErrorCode::Remote, "NCCL " + what + " failed: " + (text ? text : "error " + std::to_string(r)) +
                                     " (NCCL_DEBUG=WARN says more)");
}

}  // namespace plugboard
