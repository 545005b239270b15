// libfabric's shared library, loaded by the first context that needs it
// rather than with the plugin (README "Start-up cost"): loading it takes
// about 0.2 s on Debian, which a plugin that declines under `auto` need not
// pay. Where the build found what it needs (CMakeLists.txt), the plugin
// does not link libfabric: the five functions it calls that the headers do
// not define inline (fi_getinfo, fi_freeinfo, fi_dupinfo, fi_fabric,
// fi_strerror) are defined in fabric_library.cpp and forward to the
// library's own, bound by the symbol versions a link would have bound, so
// the headers' structs and the library agree. The library is looked up by
// its soname, then in the directory the build found it in.
#pragma once

namespace plugboard::libfabric {

/// Loads libfabric once per process; throws Error(PB_ERR_UNSUPPORTED)
/// naming the library and why when it cannot. Does nothing in a build that
/// links libfabric.
void loadFabricLibrary();

}  // namespace plugboard::libfabric
