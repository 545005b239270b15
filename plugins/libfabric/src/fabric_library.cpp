// See fabric_library.hpp.
#include "fabric_library.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <string>

#include "error.hpp"

#ifdef PB_LIBFABRIC_SONAME

#include <dlfcn.h>

namespace plugboard::libfabric {
namespace {

/// The library's handle and its five functions (null where not found).
struct FabricLibrary {
  std::string error;  ///< Why it cannot be used; "" when it can.
  std::string from;   ///< The file loaded, as dlopen was given it.
  decltype(&::fi_getinfo) getinfo = nullptr;
  decltype(&::fi_freeinfo) freeinfo = nullptr;
  decltype(&::fi_dupinfo) dupinfo = nullptr;
  decltype(&::fi_fabric) fabric = nullptr;
  decltype(&::fi_strerror) strerror = nullptr;
};

/// name@version in the library `from` as an F; records the first miss in *error.
template <typename F>
F bindSymbol(void* handle, const std::string& from, const char* name, const char* version, std::string* error) {
  void* p = dlvsym(handle, name, version);
  if (!p && error->empty())
    *error = "loaded " + from + ", but " + name + "@" + version +
             " (the version the plugin was built against) is not in it: a libfabric older than the build's?";
  return reinterpret_cast<F>(p);
}

/// dlopen(name): the handle, or null with dlerror's text in *why.
void* openLibrary(const std::string& name, std::string* why) {
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *why = e ? e : "dlopen failed";
  }
  return h;
}

/// Loaded on first use (thread-safe); never unloaded. By soname first, as
/// the dynamic loader would find a linked library (LD_LIBRARY_PATH, the
/// system's directories), then from the directory the build found it in.
const FabricLibrary& library() {
  static const FabricLibrary lib = [] {
    FabricLibrary l;
    std::string bySoname, byDir;
    l.from = PB_LIBFABRIC_SONAME;
    void* h = openLibrary(l.from, &bySoname);
    if (!h) {
      l.from = std::string(PB_LIBFABRIC_DIR) + "/" + PB_LIBFABRIC_SONAME;
      h = openLibrary(l.from, &byDir);
    }
    if (!h) {
      l.error = "cannot load " PB_LIBFABRIC_SONAME ": " + bySoname + "; nor " + l.from + " (where the build found it): " +
                byDir + " (the libfabric runtime the plugin was built against; Debian: libfabric1)";
      return l;
    }
    l.getinfo = bindSymbol<decltype(l.getinfo)>(h, l.from, "fi_getinfo", PB_FI_GETINFO_VERSION, &l.error);
    l.freeinfo = bindSymbol<decltype(l.freeinfo)>(h, l.from, "fi_freeinfo", PB_FI_FREEINFO_VERSION, &l.error);
    l.dupinfo = bindSymbol<decltype(l.dupinfo)>(h, l.from, "fi_dupinfo", PB_FI_DUPINFO_VERSION, &l.error);
    l.fabric = bindSymbol<decltype(l.fabric)>(h, l.from, "fi_fabric", PB_FI_FABRIC_VERSION, &l.error);
    l.strerror = bindSymbol<decltype(l.strerror)>(h, l.from, "fi_strerror", PB_FI_STRERROR_VERSION, &l.error);
    return l;
  }();
  return lib;
}

}  // namespace

void loadFabricLibrary() {
  const FabricLibrary& l = library();
  OFI_CHECK(l.error.empty(), PB_ERR_UNSUPPORTED, "libfabric: " + l.error);
}

}  // namespace plugboard::libfabric

using plugboard::libfabric::library;

// The plugin's own definitions (its version script keeps them local), used
// only after loadFabricLibrary() succeeded; the fallbacks answer a call made
// without it as libfabric would answer a missing provider.
extern "C" {

int fi_getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const struct fi_info* hints,
               struct fi_info** info) {
  const auto f = library().getinfo;
  return f ? f(version, node, service, flags, hints, info) : -FI_ENOSYS;
}

void fi_freeinfo(struct fi_info* info) {
  if (const auto f = library().freeinfo) f(info);
}

struct fi_info* fi_dupinfo(const struct fi_info* info) {
  const auto f = library().dupinfo;
  return f ? f(info) : nullptr;
}

int fi_fabric(struct fi_fabric_attr* attr, struct fid_fabric** fabric, void* context) {
  const auto f = library().fabric;
  return f ? f(attr, fabric, context) : -FI_ENOSYS;
}

const char* fi_strerror(int errnum) {
  const auto f = library().strerror;
  return f ? f(errnum) : "libfabric is not loaded";
}

}  // extern "C"

#else  // the plugin links libfabric

namespace plugboard::libfabric {
void loadFabricLibrary() {}
}  // namespace plugboard::libfabric

#endif
