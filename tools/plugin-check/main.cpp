// plugboard-plugin-check: the conformance kit for Plugboard transport
// plugins. Loads a plugin as the core does (without linking the core),
// runs every check group and prints PASS / FAIL / SKIP per check.
//   plugboard-plugin-check [--set key=value ...] [--timeout S] libplugboard-<name>.so
#include <signal.h>

#include <cstdio>
#include <iostream>

#include "checks.hpp"
#include "options.hpp"
#include "peer_process.hpp"
#include "report.hpp"

using namespace plugboard::check;

namespace {

/// Runs every group in order; groups that need a working table are skipped
/// (with the reason) when an earlier group found it unusable.
int runAll(const Options& o) {
  installCrashHandler();
  Report report(2 * o.timeoutSeconds + 30);
  std::printf("plugboard-plugin-check: %s\n", o.plugin.c_str());
  runExportChecks(o, report);
  bool usable = false;
  {
    LoadedPlugin p;
    runAbiChecks(o, report, p);
    usable = p.table != nullptr;
    if (usable) {
      runPropertyChecks(o, report, p);
      runSettingChecks(o, report, p);
      runConnectionChecks(o, report, p);
    }
  }  // the library is closed here, so the reload cycles really reload it
  if (usable) runLifecycleChecks(o, report);
  else report.skip("properties.*, settings.*, connection and lifecycle checks", "the plugin's table is not usable (see abi.*)");
  report.summary();
  return report.failures() == 0 ? 0 : 1;
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
  return runAll(o);
}
