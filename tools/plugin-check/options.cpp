#include "options.hpp"

#include <cstdlib>
#include <cstring>

namespace plugboard::check {
namespace {

/// Adds "key=value" to o.settings; throws UsageError for a missing '='.
void addSetting(Options& o, const std::string& kv) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) throw UsageError("setting '" + kv + "' is not key=value");
  o.settings[kv.substr(0, eq)] = kv.substr(eq + 1);
}

/// Parses a number for flag; throws UsageError unless lo <= value <= hi.
double number(const std::string& flag, const std::string& text, double lo, double hi) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || v < lo || v > hi)
    throw UsageError(flag + " '" + text + "': expected a number in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return v;
}

}  // namespace

const char* usageText() {
  return "usage: plugboard-plugin-check [options] path/to/libplugboard-<name>.so\n"
         "Runs the Plugboard transport conformance checks against one plugin and prints\n"
         "PASS/FAIL/SKIP per check; exits 1 if any check fails, 2 on a usage error, 77 when\n"
         "init says PB_ERR_UNSUPPORTED (this machine lacks the transport's hardware) and nothing failed.\n"
         "  --set KEY=VALUE           serve this plugin setting (repeatable), e.g. --set ifname=lo\n"
         "  --provider-settings K=V.. the same, several at once\n"
         "  --timeout SECONDS         bound of every wait (default 30)\n"
         "  --reload N                dlopen/init/finalize/dlclose cycles (default 20)\n"
         "  --verbose                 echo the plugin's log lines on stderr\n";
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") throw UsageError("");
    else if (a == "--set") addSetting(o, value());
    else if (a.rfind("--set=", 0) == 0) addSetting(o, a.substr(6));
    else if (a == "--provider-settings") {
      addSetting(o, value());
      while (i + 1 < argc && argv[i + 1][0] != '-' && std::strchr(argv[i + 1], '=')) addSetting(o, argv[++i]);
    } else if (a == "--timeout") o.timeoutSeconds = number(a, value(), 1, 3600);
    else if (a == "--reload") o.reloadCycles = int(number(a, value(), 0, 10000));
    else if (a == "--verbose" || a == "-v") o.verbose = true;
    else if (a == "--internal-peer") o.peerFd = int(number(a, value(), 0, 1 << 20));
    else if (!a.empty() && a[0] == '-') throw UsageError("unknown option " + a);
    else if (!o.plugin.empty()) throw UsageError("more than one plugin given: " + o.plugin + " and " + a);
    else o.plugin = a;
  }
  if (o.plugin.empty()) throw UsageError("no plugin given");
  return o;
}

std::vector<std::string> peerArguments(const Options& o, int fd) {
  std::vector<std::string> args = {"--internal-peer", std::to_string(fd), "--timeout",
                                   std::to_string(o.timeoutSeconds)};
  for (const auto& [k, v] : o.settings) {
    args.push_back("--set");
    args.push_back(k + "=" + v);
  }
  if (o.verbose) args.push_back("--verbose");
  args.push_back(o.plugin);
  return args;
}

}  // namespace plugboard::check
