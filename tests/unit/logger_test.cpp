// The one logger (plugboard/logger.hpp): levels, subsystem lists, the log
// file with %p expanded, and the opt-in timestamps, read back from the file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "plugboard/logger.hpp"

using namespace plugboard;

namespace {

/// Logs through a file named after this process; returns what it holds.
class LoggerFile : public ::testing::Test {
 protected:
  void TearDown() override {
    logConfigure("WARN", "", "", false);  // back to stderr for the other tests
    std::remove(path().c_str());
  }
  std::string path() const { return "/tmp/plugboard-logger-test-" + std::to_string(getpid()) + ".log"; }
  std::string read() const {
    std::ifstream in(path());
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

/// True when line starts "[YYYY-MM-DD HH:MM:SS.uuuuuu] ".
bool isTimestamp(const std::string& line) {
  const std::string shape = "[dddd-dd-dd dd:dd:dd.dddddd] ";
  if (line.size() < shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 'd' ? !std::isdigit(static_cast<unsigned char>(line[i])) : line[i] != shape[i]) return false;
  return true;
}

std::string hostName() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

TEST_F(LoggerFile, LevelsAndSubsystemsChooseTheLinesAndPercentPNamesTheFile) {
  std::remove(path().c_str());
  logConfigure("INFO", "NET,COLL", "/tmp/plugboard-logger-test-%p.log", false);
  PB_LOG(Info, "NET", "shown " << 1);
  PB_LOG(Trace, "NET", "too loud");
  PB_LOG(Warn, "INIT", "not listed");
  logConfigure("WARN", "^INIT", "/tmp/plugboard-logger-test-%p.log", false);
  PB_LOG(Warn, "COLL", "shown " << 2);
  PB_LOG(Warn, "INIT", "excluded");
  const std::string text = read();
  EXPECT_NE(text.find("plugboard INFO NET shown 1"), std::string::npos) << text;
  EXPECT_NE(text.find("plugboard WARN COLL shown 2"), std::string::npos) << text;
  for (const char* hidden : {"too loud", "not listed", "excluded"})
    EXPECT_EQ(text.find(hidden), std::string::npos) << hidden << " was logged: " << text;
  ASSERT_FALSE(text.empty());
  EXPECT_NE(text[0], '[') << "timestamps are off unless asked for";
}

TEST_F(LoggerFile, TimestampsStartEveryLineWithTheTimeToTheMicrosecond) {
  std::remove(path().c_str());
  logConfigure("WARN", "", path(), true);
  PB_LOG(Warn, "INIT", "first");
  PB_LOG(Warn, "INIT", "second");
  std::istringstream lines(read());
  int seen = 0;
  for (std::string line; std::getline(lines, line); ++seen) {
    EXPECT_TRUE(isTimestamp(line)) << line;
    EXPECT_NE(line.find("] " + hostName() + ":"), std::string::npos) << line;
    EXPECT_NE(line.find(seen == 0 ? "plugboard WARN INIT first" : "plugboard WARN INIT second"), std::string::npos)
        << line;
  }
  EXPECT_EQ(seen, 2);
}
