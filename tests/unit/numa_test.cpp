#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "numa.hpp"
#include "plugboard/error.hpp"

using namespace plugboard;
namespace fs = std::filesystem;

TEST(Numa, ParsesSysfsCpuLists) {
  EXPECT_EQ(parseCpuList("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parseCpuList("5"), (std::vector<int>{5}));
  EXPECT_TRUE(parseCpuList("").empty());
  EXPECT_THROW(parseCpuList("3-1"), Error);
  EXPECT_THROW(parseCpuList("a-b"), Error);
}

TEST(Numa, FindsTheNodeOfAPciDeviceInSysfs) {
  fs::path root = fs::temp_directory_path() / ("pb-numa-" + std::to_string(getpid()));
  fs::create_directories(root / "bus/pci/devices/0000:1b:00.0");
  std::ofstream(root / "bus/pci/devices/0000:1b:00.0/numa_node") << "1\n";
  EXPECT_EQ(numaNodeOfPciDevice("0000:1B:00.0", root.string()), 1);  // CUDA reports upper case
  EXPECT_EQ(numaNodeOfPciDevice("0000:99:00.0", root.string()), -1);
  EXPECT_EQ(bindThisThreadToNumaNode(-1, root.string()), "not bound (NUMA node unknown)");
  fs::create_directories(root / "devices/system/node/node1");
  std::ofstream(root / "devices/system/node/node1/cpulist") << "100000-100003\n";  // beyond any allowed CPU
  EXPECT_NE(bindThisThreadToNumaNode(1, root.string()).find("not bound"), std::string::npos);
  fs::remove_all(root);
}
