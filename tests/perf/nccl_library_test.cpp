// plugboard-perf's NCCL loader: explicit paths (--nccl-lib,
// PLUGBOARD_NCCL_LIB), the default search, and its errors. Uses fake NCCL
// libraries (fake_nccl.c); no GPU and no real NCCL needed.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "../unit/env_guard.hpp"
#include "nccl_library.hpp"
#include "plugboard/error.hpp"

namespace plugboard::perf {
namespace {

using plugboard::test::EnvGuard;

std::string loadError(const std::string& path, const std::string& source) {
  try {
    NcclLibrary::load(path, source);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
    return e.what();
  }
  ADD_FAILURE() << "loaded " << path;
  return "";
}

TEST(NcclLibrary, MissingExplicitFileListsThePathAndTheWayOut) {
  std::string e = loadError("/nonexistent/plugboard/libnccl.so.2", "--nccl-lib");
  EXPECT_NE(e.find("given by --nccl-lib"), std::string::npos) << e;
  EXPECT_NE(e.find("/nonexistent/plugboard/libnccl.so.2: no such file"), std::string::npos) << e;
  EXPECT_NE(e.find("PLUGBOARD_NCCL_LIB"), std::string::npos) << e;
  EXPECT_EQ(e.find("dynamic linker"), std::string::npos) << "an explicit path is the only one tried: " << e;
}

TEST(NcclLibrary, FileThatIsNotALibraryGivesDlerror) {
  char dir[] = "/tmp/pb-nccl-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/libnccl.so.2";
  std::ofstream(path) << "not an ELF file\n";
  std::string e = loadError(path, "PLUGBOARD_NCCL_LIB");
  EXPECT_NE(e.find("given by PLUGBOARD_NCCL_LIB"), std::string::npos) << e;
  EXPECT_NE(e.find(path + ": "), std::string::npos) << e;
  EXPECT_EQ(e.find("no such file"), std::string::npos) << e;
  unlink(path.c_str());
  rmdir(dir);
}

TEST(NcclLibrary, OptionBeatsEnvironment) {
  EnvGuard env;
  env.set("PLUGBOARD_NCCL_LIB", "/from/env/libnccl.so.2");
  std::string source;
  EXPECT_EQ(ncclLibraryRequest("/from/option/libnccl.so.2", &source), "/from/option/libnccl.so.2");
  EXPECT_EQ(source, "--nccl-lib");
  EXPECT_EQ(ncclLibraryRequest("", &source), "/from/env/libnccl.so.2");
  EXPECT_EQ(source, "PLUGBOARD_NCCL_LIB");
  env.unset("PLUGBOARD_NCCL_LIB");
  EXPECT_EQ(ncclLibraryRequest("", &source), "");
  EXPECT_EQ(source, "");
}

TEST(NcclLibrary, SearchStartsWithTheDynamicLinkerThenFindsWheels) {
  char dir[] = "/tmp/pb-venv-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string lib = std::string(dir) + "/lib/python3.99/site-packages/nvidia/nccl/lib";
  ASSERT_EQ(std::system(("mkdir -p " + lib + " && touch " + lib + "/libnccl.so.2").c_str()), 0);
  EnvGuard env;
  env.set("VIRTUAL_ENV", dir);
  std::vector<std::string> paths = ncclSearchPaths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.front(), "libnccl.so.2");
  EXPECT_NE(std::find(paths.begin(), paths.end(), lib + "/libnccl.so.2"), paths.end());
  EXPECT_EQ(std::set<std::string>(paths.begin(), paths.end()).size(), paths.size()) << "duplicates";
  ASSERT_EQ(std::system((std::string("rm -rf ") + dir).c_str()), 0);
}

TEST(NcclLibrary, SearchFailureListsEveryPathTried) {
  std::string e;
  try {
    NcclLibrary::loadFirstOf({"libnccl-plugboard-test-missing.so.2", "/nonexistent/a/libnccl.so.2"});
    ADD_FAILURE() << "loaded";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::Config);
    e = err.what();
  }
  EXPECT_NE(e.find("NCCL library not found"), std::string::npos) << e;
  EXPECT_NE(e.find("libnccl-plugboard-test-missing.so.2 (dynamic linker search): "), std::string::npos) << e;
  EXPECT_NE(e.find("/nonexistent/a/libnccl.so.2: no such file"), std::string::npos) << e;
  EXPECT_NE(e.find("--nccl-lib PATH or PLUGBOARD_NCCL_LIB"), std::string::npos) << e;
}

// The NCCL API library's fallback passes its own ncclGetVersion: a
// candidate that has it is skipped with the reason, and the search goes on.
TEST(NcclLibrary, RefusedLibraryIsSkippedAndNamed) {
  void* self = dlopen(PLUGBOARD_TEST_FAKE_NCCL_WINDOWS, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(self, nullptr) << dlerror();
  NcclLoadRules rules;
  rules.remedy = "the test's setting";
  // No RTLD_DEEPBIND here: sanitizer runtimes refuse it, and the refusal does not depend on it.
  rules.refuseVersionFunction = dlsym(self, "ncclGetVersion");
  auto lib = NcclLibrary::loadFirstOf({PLUGBOARD_TEST_FAKE_NCCL_WINDOWS, PLUGBOARD_TEST_FAKE_NCCL}, rules);
  EXPECT_EQ(lib->versionText(), "2.21.5");
  try {
    NcclLibrary::load(PLUGBOARD_TEST_FAKE_NCCL_WINDOWS, "the test", rules);
    ADD_FAILURE() << "the refused library loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is Plugboard's own NCCL API library"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fix the test's setting"), std::string::npos) << e.what();
  }
  dlclose(self);
}

TEST(NcclLibrary, SearchTakesTheFirstThatLoads) {
  auto lib = NcclLibrary::loadFirstOf({"/nonexistent/libnccl.so.2", PLUGBOARD_TEST_FAKE_NCCL});
  EXPECT_EQ(lib->versionText(), "2.21.5");
}

TEST(NcclLibrary, DefaultSearchGivesAVersionOrAListedFailure) {
  try {
    auto lib = NcclLibrary::load("", "");
    EXPECT_EQ(lib->versionText().rfind("2.", 0), 0u) << lib->path() << " " << lib->versionText();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("libnccl.so.2 (dynamic linker search)"), std::string::npos) << e.what();
  }
}

TEST(NcclLibrary, LoadsAFakeAndReadsItsVersion) {
  auto lib = NcclLibrary::load(PLUGBOARD_TEST_FAKE_NCCL, "--nccl-lib");
  EXPECT_EQ(lib->versionCode(), 22105);
  EXPECT_EQ(lib->versionText(), "2.21.5");
  EXPECT_NE(lib->path().find("fake"), std::string::npos) << lib->path();
  EXPECT_NE(lib->api().allReduce, nullptr);
  EXPECT_NE(lib->api().groupEnd, nullptr);
  EXPECT_NO_THROW(lib->check(0, "ncclAllReduce"));
  try {
    lib->check(3, "ncclAllReduce");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL ncclAllReduce failed: fake error"), std::string::npos) << e.what();
  }
}

TEST(NcclLibrary, SymmetricWindowsAreOptionalAndNamedWhenMissing) {
  auto old = NcclLibrary::load(PLUGBOARD_TEST_FAKE_NCCL, "--nccl-lib");  // 2.21.5: no windows
  EXPECT_FALSE(old->api().hasWindows());
  try {
    old->requireWindows("--nccl-symmetric");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(e.code(), ErrorCode::Config);
    for (const char* part : {"--nccl-symmetric", "NCCL 2.21.5", "fake", "2.27 or later", "--nccl-lib"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " in " << m;
  }
  auto recent = NcclLibrary::load(PLUGBOARD_TEST_FAKE_NCCL_WINDOWS, "--nccl-lib");
  EXPECT_EQ(recent->versionText(), "2.28.3");
  EXPECT_TRUE(recent->api().hasWindows());
  EXPECT_NO_THROW(recent->requireWindows("--nccl-symmetric"));
}

TEST(NcclLibrary, LibraryWithoutTheApiNamesTheMissingSymbol) {
  std::string e = loadError(PLUGBOARD_TEST_FAKE_NCCL_VERSION_ONLY, "--nccl-lib");
  EXPECT_NE(e.find("has no symbol ncclGetErrorString"), std::string::npos) << e;
}

}  // namespace
}  // namespace plugboard::perf
