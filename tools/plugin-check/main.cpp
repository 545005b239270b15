// plugboard-plugin-check: the conformance kit for Plugboard transport
// plugins. Loads a plugin as the core does (without linking the core),
// runs every check group and prints PASS / FAIL / SKIP per check.
//   plugboard-plugin-check [--set key=value ...] [--timeout S] libplugboard-<name>.so
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <iostream>

#include "checks.hpp"
#include "options.hpp"
#include "peer_process.hpp"
#include "report.hpp"

using namespace plugboard::check;

namespace {

/// Exit status when init said PB_ERR_UNSUPPORTED and nothing failed (ctest's SKIP_RETURN_CODE).
constexpr int kExitUnsupported = 77;

/// Runs every group in order; groups that need a working table are skipped
/// (with the reason) when an earlier group found it unusable.
int runAll(const Options& o) {
  installCrashHandler();
  Report report(2 * o.timeoutSeconds + 30);
  std::printf("plugboard-plugin-check: %s\n", o.plugin.c_str());
  runExportChecks(o, report);
  bool usable = false;
  std::string unsupported;
  {
    LoadedPlugin p;
    runAbiChecks(o, report, p);
    unsupported = p.unsupported;
    usable = p.table != nullptr;
    if (usable) {
      runPropertyChecks(o, report, p);
      runSettingChecks(o, report, p);
      runConnectionChecks(o, report, p);
    }
  }  // the library is closed here, so the reload cycles really reload it
  if (usable) runLifecycleChecks(o, report);
  else if (!unsupported.empty())
    report.skip("abi.init_*, properties.*, settings.*, connection and lifecycle checks",
                "init says this machine lacks what the transport needs: " + unsupported);
  else report.skip("properties.*, settings.*, connection and lifecycle checks", "the plugin's table is not usable (see abi.*)");
  report.summary();
  markReported();
  if (report.failures() > 0) return 1;
  return unsupported.empty() ? 0 : kExitUnsupported;
}

/// Runs runAll in a child and waits for it: a plugin that ends the process
/// (exit, _exit, a signal the crash handler does not catch) still gets a
/// FAIL line naming the check, and the status is 1.
int superviseChecks(const Options& o) {
  shareCheckState();
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return runAll(o);  // no supervisor: the checks still run
  if (pid == 0) {
    const int rc = runAll(o);
    std::fflush(stdout);
    _exit(rc);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (reportAbruptEnd(status)) return 1;
  if (!WIFEXITED(status)) return 1;
  const int rc = WEXITSTATUS(status);
  return rc == 0 || rc == kExitUnsupported ? rc : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parseOptions(argc, argv);
  } catch (const UsageError& e) {
    if (*e.what()) std::cerr << "plugboard-plugin-check: " << e.what() << "\n";
    std::cerr << usageText();
    return *e.what() ? 2 : 0;
  }
  signal(SIGPIPE, SIG_IGN);
  if (o.peerFd >= 0) return runPeer(o);
  return superviseChecks(o);
}
