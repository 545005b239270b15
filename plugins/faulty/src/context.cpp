#include "context.hpp"

#include <cstdlib>
#include <cstring>

#include "error.hpp"

namespace plugboard::faulty {

namespace {

constexpr const char* kInner = "inner";
constexpr const char* kFault = "fault";
constexpr const char* kOps = "ops";
constexpr const char* kAfter = "after";
constexpr const char* kCount = "count";
constexpr const char* kRanks = "ranks";
constexpr const char* kDelayUs = "delay_us";
constexpr const char* kExitCode = "exit_code";

/// A non-negative integer setting; Error naming it otherwise.
uint64_t parseCount(const char* key, const std::string& text, uint64_t max) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  FAULTY_CHECK(!text.empty() && end && *end == '\0' && v >= 0 && static_cast<unsigned long long>(v) <= max,
               PB_ERR_INVALID,
               std::string("faulty: setting ") + key + "='" + text + "' is not an integer in [0, " +
                   std::to_string(max) + "]");
  return static_cast<uint64_t>(v);
}

}  // namespace

Context::Context(const pb_host_services_v1* host) : host_(host, "faulty") {
  declareSettings();
  readSettings();
  counter_.configure(plan_);
  injects_ = plan_.injectsOn(host_.rank());
  inner_ = std::make_unique<InnerTransport>(host_.setting(kInner), *host);
  if (injects_) log(PB_LOG_WARN, injectionText());
}

std::string Context::injectionText() const {
  return "injecting fault '" + std::string(faultName(plan_.fault)) + "' on rank " + std::to_string(rank()) + " over " +
         inner_->name() + " (after " + std::to_string(plan_.after) + ", count " + std::to_string(plan_.count) + ")";
}

std::string Context::report() const {
  std::string out = "wraps " + inner_->name() + "\n" +
                    (injects_ ? injectionText() : "no fault injected on rank " + std::to_string(rank()));
  const pb_transport_v1& t = inner_->api();
  size_t needed = 0;
  if (!PB_HAS_FIELD(&t, pb_transport_v1, describe) || !t.describe ||
      t.describe(inner_->ctx(), nullptr, 0, &needed) != PB_ERR_NOMEM || needed == 0 || needed > (1u << 20))
    return out;
  std::string inner(needed, '\0');
  if (t.describe(inner_->ctx(), inner.data(), inner.size(), &needed) != PB_OK) return out;
  inner.resize(std::strlen(inner.c_str()));
  return out + "\n" + inner_->name() + ": " + inner;
}

void Context::declareSettings() const {
  const pb_setting_decl_v1 decls[] = {
      {sizeof(pb_setting_decl_v1), kInner, PB_SETTING_STRING, "ethernet",
       "The transport faulty wraps: a name (libplugboard-<name>.so beside faulty's) or a path; its own "
       "settings become faulty.inner_<key>",
       0},
      {sizeof(pb_setting_decl_v1), kFault, PB_SETTING_STRING, "none",
       "Fault to inject: none, delay, drop, duplicate, reorder, corrupt, truncate, fail_op, fail_register, "
       "fail_connect, exit",
       0},
      {sizeof(pb_setting_decl_v1), kOps, PB_SETTING_STRING, "all",
       "Operations the data-path faults count and strike: all, write or signal (write_signal is both)", 0},
      {sizeof(pb_setting_decl_v1), kAfter, PB_SETTING_INT, "0",
       "Eligible events (operations, registrations or connections) that pass before the first fault", 0},
      {sizeof(pb_setting_decl_v1), kCount, PB_SETTING_INT, "1", "Events struck; 0: every one after 'after'", 0},
      {sizeof(pb_setting_decl_v1), kRanks, PB_SETTING_STRING, "all",
       "Ranks that inject: all, or a comma-separated list such as 1,3", 0},
      {sizeof(pb_setting_decl_v1), kDelayUs, PB_SETTING_INT, "1000",
       "delay: microseconds an operation (and every later one on its connection) is held", 0},
      {sizeof(pb_setting_decl_v1), kExitCode, PB_SETTING_INT, "17", "exit: the process's exit status", 0},
  };
  host_.declare(decls, sizeof(decls) / sizeof(decls[0]));
}

void Context::readSettings() {
  plan_.fault = FaultPlan::parseFault(host_.setting(kFault));
  plan_.ops = FaultPlan::parseOps(host_.setting(kOps));
  plan_.after = parseCount(kAfter, host_.setting(kAfter), uint64_t(1) << 62);
  plan_.count = parseCount(kCount, host_.setting(kCount), uint64_t(1) << 62);
  plan_.parseRanks(host_.setting(kRanks));
  plan_.delayUs = parseCount(kDelayUs, host_.setting(kDelayUs), 600'000'000);
  plan_.exitCode = static_cast<int>(parseCount(kExitCode, host_.setting(kExitCode), 255));
}

std::string Context::describe(const std::string& what, uint64_t n) const {
  return "faulty: injected " + std::string(faultName(plan_.fault)) + " at " + what + " #" + std::to_string(n) +
         " on rank " + std::to_string(rank()) + " (host " + hostname() + ") as faulty.fault asks";
}

}  // namespace plugboard::faulty
