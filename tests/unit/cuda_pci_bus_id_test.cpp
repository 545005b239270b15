// The core's cuda_pci_bus_id host service (transport ABI 1.5): arguments,
// the sysfs form of a bus id, and where a GPU is present, an id that names
// a PCI function of this host.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "plugins/cuda_pci_bus_id.hpp"

namespace plugboard {
namespace {

TEST(CudaPciBusId, TheSysfsFormIsLowercaseWithAFourDigitDomain) {
  EXPECT_EQ(sysfsPciBusId("0000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(sysfsPciBusId("00000000:3B:00.0"), "0000:3b:00.0") << "nvidia-smi's 8-digit domain";
  EXPECT_EQ(sysfsPciBusId("00010000:3B:00.0"), "00010000:3b:00.0") << "a domain that needs its high digits";
  EXPECT_EQ(sysfsPciBusId("0001:C1:00.0"), "0001:c1:00.0");
  char small[4];
  EXPECT_EQ(copyPciBusId("0000:3b:00.0", small, sizeof small), PB_ERR_NOMEM);
  char fits[13];
  ASSERT_EQ(copyPciBusId("0000:3b:00.0", fits, sizeof fits), PB_OK);
  EXPECT_STREQ(fits, "0000:3b:00.0");
}

TEST(CudaPciBusId, NamesThisHostsGpuElseSaysUnsupported) {
  EXPECT_EQ(cudaPciBusId(nullptr, 0), PB_ERR_INVALID);
  char id[PB_PCI_BUS_ID_LEN] = "untouched";
  const pb_status st = cudaPciBusId(id, sizeof id);
  if (st != PB_OK) {
    EXPECT_EQ(st, PB_ERR_UNSUPPORTED);
    EXPECT_STREQ(id, "untouched");
    GTEST_SKIP() << "no CUDA device here";
  }
  const std::string sysfs = std::string("/sys/bus/pci/devices/") + id;
  struct stat s;
  EXPECT_EQ(::stat(sysfs.c_str(), &s), 0) << sysfs << " does not exist";
  char tiny[4];
  EXPECT_EQ(cudaPciBusId(tiny, sizeof tiny), PB_ERR_NOMEM);
}

}  // namespace
}  // namespace plugboard
