#include "context.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <random>
#include <vector>

#include "error.hpp"
#include "nic_affinity.hpp"

namespace plugboard::ibverbs {

Context::Context(const pb_host_services_v1* host) : host_(host, "ib-verbs") {
  declareSettings();
  settings_ = parseSettings([this](const std::string& key) -> std::optional<std::string> {
    return host_.setting(key.c_str());
  });
  const Discovery found = discoverPorts(settings_);
  IBV_CHECK(!found.usable.empty(), PB_ERR_UNSUPPORTED,
            "ib-verbs: rank " + std::to_string(host_.rank()) + " (host " + host_.hostname() + "): " + found.whyNone());
  const std::string gpuBusId = host_.cudaPciBusId();
  const PortPick pick = pickPort(found.usable, pciDevicePlace(gpuBusId));
  port_ = found.usable[pick.index];
  for (const auto& p : found.usable) report_.push_back("port " + p.describe());
  for (const auto& s : found.skipped) report_.push_back("skipped " + s);

  int n = 0;
  DeviceList list(ibv_get_device_list(&n));
  ibv_device* chosen = nullptr;
  for (int i = 0; list && i < n && !chosen; ++i)
    if (port_.device == ibv_get_device_name(list.get()[i])) chosen = list.get()[i];
  IBV_CHECK(chosen, PB_ERR_SYSTEM, "ib-verbs: " + where() + ": the device disappeared since it was discovered");
  device_.reset(ibv_open_device(chosen));
  if (!device_) verbsNullFailure("ib-verbs: " + where() + ": ibv_open_device", PB_ERR_SYSTEM);
  pd_.reset(ibv_alloc_pd(device_.get()));
  if (!pd_) verbsNullFailure("ib-verbs: " + where() + ": ibv_alloc_pd", PB_ERR_SYSTEM);
  cq_ = std::make_unique<SharedCq>(device_.get(), where());
  cuda_ = cudaMemoryPaths(host_.exportsCudaDmabuf(), probeDmabuf(pd_.get()), peerMemoryModuleLoaded(), port_.name());
  report_.push_back("uses " + port_.describe() + ", " + pick.reason + (gpuBusId.empty() ? "" : " at " + gpuBusId) +
                    "; " + cuda_.reason);
  for (const auto& line : report_) log(PB_LOG_INFO, "ib-verbs " + line);
}

std::string Context::describe() const {
  std::string out;
  for (const auto& line : report_) out += (out.empty() ? "" : "\n") + line;
  return out;
}

Context::~Context() {
  // Regions the core left registered go before the protection domain does.
  for (LocalRegion* r : regions_) delete r;
}

void Context::declareSettings() const {
  std::vector<pb_setting_decl_v1> decls;
  for (const SettingSpec& s : settingSpecs()) {
    const std::string key = s.key;
    const bool text = key == "hca";
    const bool perRank = key == "hca" || key == "gid_index";  // NICs and GID tables differ between hosts
    decls.push_back({sizeof(pb_setting_decl_v1), s.key, text ? PB_SETTING_STRING : PB_SETTING_INT, s.defaultValue,
                     s.doc, perRank ? 1 : 0});
  }
  host_.declare(decls.data(), decls.size());
}

ibv_mr* Context::registerCuda(void* ptr, size_t size, int access) {
  std::string dmabufProblem;
  if (cuda_.dmabuf) {
    try {
      uint64_t offset = 0;
      const int fd = host_.cudaDmabufFd(ptr, size, &offset);
      // iova = ptr: peers address the region by the pointer the key carries.
      ibv_mr* mr = ibv_reg_dmabuf_mr(pd_.get(), offset, size, reinterpret_cast<uint64_t>(ptr), fd, access);
      const int err = errno;
      ::close(fd);  // the registration holds its own reference to the dma-buf
      if (mr) return mr;
      dmabufProblem = std::string("ibv_reg_dmabuf_mr failed: ") + (err ? std::strerror(err) : "no reason given");
    } catch (const transport_cxx::Failure& e) {
      dmabufProblem = e.what();
    }
  }
  if (cuda_.peerMemory) {
    if (ibv_mr* mr = ibv_reg_mr(pd_.get(), ptr, size, access)) return mr;
    verbsNullFailure("ib-verbs: " + where() + ": ibv_reg_mr of " + std::to_string(size) + " bytes of CUDA memory" +
                         " (nvidia-peermem)" + (dmabufProblem.empty() ? "" : "; as a dma-buf: " + dmabufProblem),
                     PB_ERR_SYSTEM);
  }
  throw Error(PB_ERR_UNSUPPORTED, "ib-verbs register_memory: " + where() + ": " + std::to_string(size) +
                                      " bytes of CUDA memory: " + dmabufProblem);
}

LocalRegion* Context::registerMemory(void* ptr, size_t size, pb_mem_type type) {
  IBV_CHECK(type == PB_MEM_HOST || (type == PB_MEM_CUDA && cudaMemory()), PB_ERR_UNSUPPORTED,
            "ib-verbs register_memory: " + where() + ": " +
                (type == PB_MEM_CUDA ? cuda_.reason : "unknown memory type " + std::to_string(type)));
  IBV_CHECK(ptr && size > 0, PB_ERR_INVALID, "ib-verbs register_memory: an empty or NULL region");
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
  auto region = std::make_unique<LocalRegion>();
  if (type == PB_MEM_CUDA) {
    region->mr.reset(registerCuda(ptr, size, access));
  } else {
    region->mr.reset(ibv_reg_mr(pd_.get(), ptr, size, access));
    if (!region->mr)
      verbsNullFailure("ib-verbs: " + where() + ": ibv_reg_mr of " + std::to_string(size) + " bytes of host memory",
                       PB_ERR_SYSTEM);
  }
  region->base = static_cast<char*>(ptr);
  region->size = size;
  region->type = type;
  static thread_local std::mt19937_64 random{std::random_device{}()};
  region->check = random();
  std::lock_guard<std::mutex> lock(mutex_);
  region->id = nextRegion_++;
  regions_.insert(region.get());
  return region.release();
}

void Context::deregisterMemory(LocalRegion* region) {
  std::lock_guard<std::mutex> lock(mutex_);
  IBV_CHECK(regions_.count(region) == 1, PB_ERR_INVALID,
            "ib-verbs deregister_memory: " + where() + ": the region is not registered with this context");
  // Once ibv_dereg_mr succeeds the HCA refuses the rkey, so nothing is
  // written into the region after this returns. If it fails the region
  // stays registered (and listed) and the caller learns why.
  verbsCheck(ibv_dereg_mr(region->mr.get()), "ib-verbs deregister_memory: " + where() + ": ibv_dereg_mr of region " +
                                                 std::to_string(region->id), PB_ERR_SYSTEM);
  region->mr.release();
  regions_.erase(region);
  delete region;
}

size_t Context::regionCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return regions_.size();
}

std::string Context::where() const {
  return "rank " + std::to_string(host_.rank()) + " (host " + host_.hostname() + "), " + port_.name();
}

void Context::log(pb_log_level level, const std::string& message) const {
  host_.log(level, "rank " + std::to_string(host_.rank()) + ": " + message);
}

}  // namespace plugboard::ibverbs
