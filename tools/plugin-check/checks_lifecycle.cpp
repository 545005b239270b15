// Load/unload cycles: a plugin must survive dlclose and a fresh dlopen, and
// leave no descriptor or thread behind after finalize.
#include <dirent.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "checks.hpp"
#include "fake_host.hpp"
#include "timing.hpp"

namespace plugboard::check {
namespace {

/// Entries of a /proc directory (fd numbers or thread ids).
std::set<std::string> listDir(const char* dir) {
  std::set<std::string> out;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.insert(e->d_name);
    closedir(d);
  }
  return out;
}

/// What /proc/self/fd/<fd> points to.
std::string fdTarget(const std::string& fd) {
  char buf[512];
  ssize_t n = readlink(("/proc/self/fd/" + fd).c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, size_t(n)) : "?";
}

/// One dlopen / init / properties / finalize / dlclose round.
void oneCycle(const Options& o, int cycle) {
  auto fail = [&](const std::string& what) { throw CheckFailed("cycle " + std::to_string(cycle) + ": " + what); };
  std::unique_ptr<PluginLibrary> lib;
  try {
    lib = std::make_unique<PluginLibrary>(o.plugin);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  const pb_transport_v1* t = lib->table(PB_TRANSPORT_ABI_MAJOR, PB_TRANSPORT_ABI_MINOR);
  if (!t || !t->init || !t->finalize || !t->properties) fail("no usable table after dlopen");
  FakeHost host(0, 2, localHostName(), o.settings, false);
  pb_plugin_ctx* ctx = nullptr;
  pb_status st = t->init(host.services(), &ctx);
  if (st != PB_OK) fail("init returned " + statusName(st) + ": " + lastError(*t, nullptr));
  pb_transport_properties_v1 props{};
  props.struct_size = sizeof(props);
  st = t->properties(ctx, &props);
  if (st != PB_OK) fail("properties returned " + statusName(st) + ": " + lastError(*t, ctx));
  st = t->finalize(ctx);
  if (st != PB_OK) fail("finalize returned " + statusName(st) + ": " + lastError(*t, ctx));
}

}  // namespace

void runLifecycleChecks(const Options& o, Report& r) {
  std::set<std::string> fdsBefore, threadsBefore;
  bool cycled = r.run("lifecycle.reload", [&] {
    if (o.reloadCycles == 0) skip("--reload 0");
    fdsBefore = listDir("/proc/self/fd");
    threadsBefore = listDir("/proc/self/task");
    for (int i = 1; i <= o.reloadCycles; ++i) oneCycle(o, i);
  });
  if (!cycled) {
    r.skip("lifecycle.no_leaks", "lifecycle.reload did not pass");
    return;
  }
  r.run("lifecycle.no_leaks", [&] {
    // Threads may take a moment to exit after finalize returns.
    Deadline settle(2.0);
    std::set<std::string> threads;
    while ((threads = listDir("/proc/self/task")).size() > threadsBefore.size() && !settle.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::string leaked;
    for (const auto& fd : listDir("/proc/self/fd"))
      if (!fdsBefore.count(fd)) leaked += (leaked.empty() ? "" : ", ") + fd + " -> " + fdTarget(fd);
    expect(leaked.empty(), "file descriptors left open after " + std::to_string(o.reloadCycles) +
                               " init/finalize/dlclose cycles: " + leaked);
    expect(threads.size() <= threadsBefore.size(),
           std::to_string(threads.size() - threadsBefore.size()) + " thread(s) still running after " +
               std::to_string(o.reloadCycles) + " init/finalize/dlclose cycles");
  });
}

}  // namespace plugboard::check
