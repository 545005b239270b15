#include "context.hpp"

#include <sys/stat.h>

#include <random>
#include <vector>

#include "error.hpp"

namespace plugboard::ibverbs {

bool peerMemoryModuleLoaded() {
  struct stat st;
  return ::stat("/sys/module/nvidia_peermem", &st) == 0 || ::stat("/sys/module/nv_peer_mem", &st) == 0;
}

Context::Context(const pb_host_services_v1* host) : host_(host, "ib-verbs") {
  declareSettings();
  settings_ = parseSettings([this](const std::string& key) -> std::optional<std::string> {
    return host_.setting(key.c_str());
  });
  const Discovery found = discoverPorts(settings_);
  IBV_CHECK(!found.usable.empty(), PB_ERR_UNSUPPORTED,
            "ib-verbs: rank " + std::to_string(host_.rank()) + " (host " + host_.hostname() + "): " + found.whyNone());
  port_ = found.usable.front();
  for (const auto& p : found.usable) log(PB_LOG_INFO, "ib-verbs port " + p.describe());
  for (const auto& s : found.skipped) log(PB_LOG_INFO, "ib-verbs skipped " + s);

  int n = 0;
  DeviceList list(ibv_get_device_list(&n));
  for (int i = 0; list && i < n && !device_; ++i)
    if (port_.device == ibv_get_device_name(list.get()[i])) device_.reset(ibv_open_device(list.get()[i]));
  if (!device_) verbsNullFailure("ib-verbs: ibv_open_device(" + port_.device + ")", PB_ERR_SYSTEM);
  pd_.reset(ibv_alloc_pd(device_.get()));
  if (!pd_) verbsNullFailure("ib-verbs: ibv_alloc_pd on " + port_.device, PB_ERR_SYSTEM);
  cudaMemory_ = peerMemoryModuleLoaded();
  log(PB_LOG_INFO, "ib-verbs uses " + port_.describe() + (cudaMemory_ ? "; CUDA memory through nvidia-peermem" : ""));
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

LocalRegion* Context::registerMemory(void* ptr, size_t size, pb_mem_type type) {
  IBV_CHECK(type == PB_MEM_HOST || (type == PB_MEM_CUDA && cudaMemory_), PB_ERR_UNSUPPORTED,
            std::string("ib-verbs register_memory: ") +
                (type == PB_MEM_CUDA ? "CUDA memory needs the nvidia_peermem kernel module, which is not loaded "
                                       "(the core stages such buffers through host memory)"
                                     : "unknown memory type " + std::to_string(type)));
  IBV_CHECK(ptr && size > 0, PB_ERR_INVALID, "ib-verbs register_memory: an empty or NULL region");
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
  auto region = std::make_unique<LocalRegion>();
  region->mr.reset(ibv_reg_mr(pd_.get(), ptr, size, access));
  if (!region->mr)
    verbsNullFailure("ib-verbs: ibv_reg_mr of " + std::to_string(size) + " bytes of " +
                         (type == PB_MEM_CUDA ? "CUDA" : "host") + " memory on " + port_.device,
                     PB_ERR_SYSTEM);
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
  std::unique_ptr<LocalRegion> owned;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    IBV_CHECK(regions_.erase(region) == 1, PB_ERR_INVALID,
              "ib-verbs deregister_memory: the region is not registered with this context");
    owned.reset(region);
  }
  // ibv_dereg_mr (the handle's deleter): the HCA refuses the rkey from now
  // on, so nothing is written into the region once this returns.
}

size_t Context::regionCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return regions_.size();
}

void Context::log(pb_log_level level, const std::string& message) const {
  host_.log(level, "rank " + std::to_string(host_.rank()) + ": " + message);
}

}  // namespace plugboard::ibverbs
