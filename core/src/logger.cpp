#include "plugboard/logger.hpp"

#include <unistd.h>
#include <sys/syscall.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <set>

#include "plugboard/error.hpp"

namespace plugboard {
namespace {

struct LoggerState {
  std::mutex mutex;
  std::atomic<int> level{static_cast<int>(LogLevel::Warn)};
  std::set<std::string> subsystems;  // empty: all
  bool exclude = false;              // true: subsystems lists those to hide
  FILE* out = stderr;
  bool timestamps = false;           // each line starts with the wall-clock time
  std::string host;
  std::atomic<int> rank{-1};
};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

std::string expandFileName(const std::string& pattern, const std::string& host) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 'h') { out += host; ++i; continue; }
      if (c == 'p') { out += std::to_string(getpid()); ++i; continue; }
    }
    out += pattern[i];
  }
  return out;
}

const char* envOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

/// "1", "true", "yes" or "on" (any case).
bool isOn(const char* text) {
  const std::string t = upper(text ? text : "");
  return t == "1" || t == "TRUE" || t == "YES" || t == "ON";
}

void configure(LoggerState& s, const char* level, const char* sub, const char* file, bool timestamps) {
  s.timestamps = timestamps;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  s.host = host;
  int parsed = static_cast<int>(LogLevel::Warn);
  if (level && *level) {
    try {
      parsed = static_cast<int>(parseLogLevel(level));
    } catch (const Error&) {
      std::fprintf(stderr, "plugboard: WARN debug level '%s' is not NONE/WARN/INFO/TRACE; using WARN\n", level);
    }
  }
  s.level = parsed;
  s.subsystems.clear();
  s.exclude = false;
  if (sub && *sub) {
    std::string list = sub;
    if (list[0] == '^') { s.exclude = true; list.erase(0, 1); }
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      std::string item = upper(list.substr(start, comma - start));
      if (!item.empty()) s.subsystems.insert(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (s.out != stderr) std::fclose(s.out);
  s.out = stderr;
  if (file && *file) {
    std::string path = expandFileName(file, s.host);
    if (FILE* f = std::fopen(path.c_str(), "a")) {
      s.out = f;
    } else {
      std::fprintf(stderr, "plugboard: WARN cannot open debug file %s; logging to stderr\n", path.c_str());
    }
  }
}

LoggerState& state() {
  static LoggerState* s = [] {
    auto* st = new LoggerState();  // never destroyed: usable from exit handlers
    configure(*st, envOr("PLUGBOARD_DEBUG"), envOr("PLUGBOARD_DEBUG_SUBSYS"), envOr("PLUGBOARD_DEBUG_FILE"),
              isOn(envOr("PLUGBOARD_DEBUG_TIMESTAMPS")));
    return st;
  }();
  return *s;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    case LogLevel::Trace: return "TRACE";
    default: return "";
  }
}

}  // namespace

LogLevel parseLogLevel(const std::string& text) {
  std::string t = upper(text);
  if (t == "NONE") return LogLevel::None;
  if (t == "WARN") return LogLevel::Warn;
  if (t == "INFO") return LogLevel::Info;
  if (t == "TRACE") return LogLevel::Trace;
  throw Error(ErrorCode::Config, "log level '" + text + "' is not one of NONE, WARN, INFO, TRACE");
}

bool logEnabled(LogLevel level, const char* subsys) {
  LoggerState& s = state();
  if (static_cast<int>(level) > s.level.load(std::memory_order_relaxed)) return false;
  if (s.subsystems.empty()) return true;
  bool listed = s.subsystems.count(upper(subsys ? subsys : "")) > 0;
  return s.exclude ? !listed : listed;
}

/// "[2026-11-29 14:05:38.123456] ": the local wall-clock time to the microsecond.
std::string timestampNow() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  tm local{};
  localtime_r(&now.tv_sec, &local);
  char date[32], micros[8];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &local);
  std::snprintf(micros, sizeof(micros), "%06d", static_cast<int>(now.tv_nsec / 1000 % 1000000));
  return std::string("[") + date + "." + micros + "] ";
}

void logWrite(LogLevel level, const char* subsys, const std::string& message) {
  LoggerState& s = state();
  long tid = static_cast<long>(syscall(SYS_gettid));
  std::lock_guard<std::mutex> lock(s.mutex);
  // One call per line: processes sharing a stream (ranks on one terminal)
  // write whole lines, the time stamp included.
  const std::string stamp = s.timestamps ? timestampNow() : std::string();
  int rank = s.rank.load();
  if (rank >= 0) {
    std::fprintf(s.out, "%s%s:%d:%ld [%d] plugboard %s %s %s\n", stamp.c_str(), s.host.c_str(), getpid(), tid, rank,
                 levelName(level), subsys, message.c_str());
  } else {
    std::fprintf(s.out, "%s%s:%d:%ld plugboard %s %s %s\n", stamp.c_str(), s.host.c_str(), getpid(), tid,
                 levelName(level), subsys, message.c_str());
  }
  std::fflush(s.out);
}

void logSetRank(int rank) { state().rank = rank; }

void logReconfigure() {
  logConfigure(envOr("PLUGBOARD_DEBUG"), envOr("PLUGBOARD_DEBUG_SUBSYS"), envOr("PLUGBOARD_DEBUG_FILE"),
               isOn(envOr("PLUGBOARD_DEBUG_TIMESTAMPS")));
}

void logConfigure(const std::string& level, const std::string& subsys, const std::string& file, bool timestamps) {
  LoggerState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  configure(s, level.c_str(), subsys.c_str(), file.c_str(), timestamps);
}

}  // namespace plugboard
