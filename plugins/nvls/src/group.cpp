#include "group.hpp"

#include <cstring>
#include <limits>
#include <new>
#include <numeric>

#include "support.hpp"

namespace plugboard::nvls {

namespace {

/// message without its leading "nvls: " or "nvls group_create: " (a
/// report is quoted inside another rank's message, which has its own).
std::string bare(const std::string& message) {
  for (const char* prefix : {"nvls group_create: ", "nvls: "}) {
    const size_t n = std::strlen(prefix);
    if (message.compare(0, n, prefix) == 0) return message.substr(n);
  }
  return message;
}

/// A blank report of this rank for phase.
Report reportFor(const GroupRequest& request, Phase phase) {
  Report r;
  r.phase = phase;
  r.groupRank = request.rank;
  r.nranks = request.nranks;
  r.device = request.device;
  r.bytes = request.bytes;
  return r;
}

/// Marks r failed with status and message.
void markFailed(Report& r, pb_status status, const std::string& message) {
  r.status = status;
  r.what = bare(message);
}

}  // namespace

uint64_t commonGranularity(const std::vector<uint64_t>& granularities) {
  uint64_t common = 1;
  for (uint64_t g : granularities) {
    NVLS_CHECK(g > 0, PB_ERR_INVALID, "nvls: the driver reported a granularity of 0 bytes");
    const uint64_t step = common / std::gcd(common, g);
    NVLS_CHECK(step <= std::numeric_limits<uint64_t>::max() / g, PB_ERR_NOMEM,
               "nvls: the granularities' least common multiple overflows");
    common = step * g;
  }
  return common;
}

size_t roundUp(size_t bytes, uint64_t granularity) {
  NVLS_CHECK(granularity > 0, PB_ERR_INVALID, "nvls: cannot round up to a granularity of 0 bytes");
  const uint64_t blocks = bytes / granularity + (bytes % granularity != 0);
  NVLS_CHECK(blocks <= std::numeric_limits<size_t>::max() / granularity, PB_ERR_NOMEM,
             "nvls: " + std::to_string(bytes) + " bytes rounded up to a multiple of " + std::to_string(granularity) +
                 " overflow");
  return static_cast<size_t>(blocks * granularity);
}

std::unique_ptr<MulticastGroup> MulticastGroup::create(const NvlsDriver& d, const GroupRequest& request,
                                                       Exchange& exchange, const GroupOptions& options) {
  std::unique_ptr<MulticastGroup> group(new MulticastGroup(d, request));
  group->build(exchange, options);
  return group;
}

void MulticastGroup::refuse(const GroupRequest& request, Exchange& exchange, const Error& refusal) {
  try {
    Report mine = reportFor(request, Phase::Agree);
    markFailed(mine, refusal.status(), refusal.what());
    exchange.gather(mine);
  } catch (...) {  // the refusal is what this rank reports, whatever the exchange did
  }
  throw refusal;
}

MulticastGroup::~MulticastGroup() {
  if (held_.size() == 0 || !primary_) return;
  try {
    ContextGuard guard(d_, primary_->context());
    held_.releaseAll();
  } catch (...) {  // the context would not switch: release under whatever is current
    held_.releaseAll();
  }
}

void MulticastGroup::destroy() {
  std::string first;
  if (primary_) {
    ContextGuard guard(d_, primary_->context());
    first = held_.releaseAll();
  }
  NVLS_CHECK(first.empty(), PB_ERR_SYSTEM,
             "nvls: " + request_.describeSelf() + ": releasing the group buffer: " + first +
                 " (everything else was released)");
}

template <typename Work>
std::vector<Report> MulticastGroup::phase(Exchange& exchange, Phase which, Work&& work) {
  Report mine = reportFor(request_, which);
  try {
    work(mine);
  } catch (const Error& e) {
    markFailed(mine, e.status(), e.what());
  } catch (const std::bad_alloc&) {
    markFailed(mine, PB_ERR_NOMEM, "out of memory");
  } catch (const std::exception& e) {
    markFailed(mine, PB_ERR_INTERNAL, std::string("internal error: ") + e.what());
  }
  std::vector<Report> all = exchange.gather(mine);
  throwIfAnyFailed(all, which);
  return all;
}

void MulticastGroup::throwIfAnyFailed(const std::vector<Report>& reports, Phase which) const {
  int first = -1, failed = 0;
  for (size_t i = 0; i < reports.size(); ++i) {
    if (reports[i].status == PB_OK) continue;
    if (first < 0) first = static_cast<int>(i);
    ++failed;
  }
  if (first < 0) return;
  const Report& r = reports[static_cast<size_t>(first)];
  std::string message = "nvls: " + request_.describe(first) + " failed while " + phaseName(which) + ": " + r.what;
  if (failed > 1) message += " (" + std::to_string(failed - 1) + " other rank(s) failed too)";
  const pb_status status = r.status < 0 && r.status >= PB_ERR_INTERNAL ? static_cast<pb_status>(r.status)
                                                                        : PB_ERR_REMOTE;
  throw Error(status, message);
}

void MulticastGroup::build(Exchange& exchange, const GroupOptions& options) {
  std::optional<ContextGuard> guard;
  decide(phase(exchange, Phase::Agree, [&](Report& mine) { agree(mine, options, guard); }));

  const auto sizes = phase(exchange, Phase::Granularity, [&](Report& mine) { queryGranularity(mine); });
  std::vector<uint64_t> granularities;
  for (const Report& r : sizes) granularities.insert(granularities.end(), {r.mcGranularity, r.ucGranularity});
  granularity_ = commonGranularity(granularities);
  bytes_ = roundUp(request_.bytes, granularity_);

  const auto created = phase(exchange, Phase::Create, [&](Report& mine) {
    if (request_.rank == 0) createAndExport(mine, options);
  });
  // Its gather is the barrier: every device is added before anyone binds.
  phase(exchange, Phase::Join, [&](Report&) { importAndAdd(created[0], options); });
  exported_.reset();
  phase(exchange, Phase::Bind, [&](Report&) { allocateAndBind(); });
  // Its gather is the barrier: every rank is bound and mapped before any
  // kernel uses a view.
  phase(exchange, Phase::Map, [&](Report&) { mapViews(); });
}

void MulticastGroup::agree(Report& mine, const GroupOptions& options, std::optional<ContextGuard>& guard) {
  primary_.emplace(d_, request_.device);
  guard.emplace(d_, primary_->context());
  const HandleSupport s = queryHandleSupport(d_, primary_->device(), options.handlePreference);
  mine.handlePreference = static_cast<uint32_t>(s.preference);
  mine.fabric = s.fabric;
  mine.posixFd = s.posixFd;
}

void MulticastGroup::decide(const std::vector<Report>& all) {
  std::vector<HandleSupport> support;
  for (const Report& r : all) {
    NVLS_CHECK(r.nranks == request_.nranks && r.bytes == request_.bytes, PB_ERR_INVALID,
               "nvls: the ranks disagree on the group: " + request_.describe(0) + " asks for " +
                   std::to_string(all[0].bytes) + " bytes in a group of " + std::to_string(all[0].nranks) + ", " +
                   request_.describe(r.groupRank) + " for " + std::to_string(r.bytes) + " in a group of " +
                   std::to_string(r.nranks));
    HandleSupport s;
    s.preference = r.handlePreference <= 2 ? static_cast<HandlePreference>(r.handlePreference) : HandlePreference::Auto;
    s.fabric = r.fabric != 0;
    s.posixFd = r.posixFd != 0;
    support.push_back(s);
  }
  kind_ = chooseHandleKind(support, [&](int rank) { return request_.describe(rank); });
}

CUmulticastObjectProp MulticastGroup::multicastProp(size_t size) const {
  CUmulticastObjectProp prop{};
  prop.numDevices = static_cast<unsigned int>(request_.nranks);
  prop.size = size;
  prop.handleTypes = static_cast<unsigned long long>(cuHandleType(kind_));
  prop.flags = 0;
  return prop;
}

CUmemAllocationProp MulticastGroup::allocationProp() const {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = primary_->device();
  prop.requestedHandleTypes = cuHandleType(kind_);
  return prop;
}

void MulticastGroup::queryGranularity(Report& mine) const {
  const CUmulticastObjectProp mcProp = multicastProp(request_.bytes);
  size_t mc = 0, uc = 0;
  d_.check(d_.cuMulticastGetGranularity(&mc, &mcProp, CU_MULTICAST_GRANULARITY_RECOMMENDED),
           "cuMulticastGetGranularity");
  const CUmemAllocationProp ucProp = allocationProp();
  d_.check(d_.cuMemGetAllocationGranularity(&uc, &ucProp, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
           "cuMemGetAllocationGranularity");
  mine.mcGranularity = mc;
  mine.ucGranularity = uc;
}

void MulticastGroup::createAndExport(Report& mine, const GroupOptions& options) {
  const CUmulticastObjectProp prop = multicastProp(bytes_);
  d_.check(d_.cuMulticastCreate(&mc_, &prop), "cuMulticastCreate");
  held_.allocation("multicast object", mc_);
  if (kind_ == HandleKind::Fabric) {
    CUmemFabricHandle handle{};
    d_.check(d_.cuMemExportToShareableHandle(&handle, mc_, CU_MEM_HANDLE_TYPE_FABRIC, 0),
             "cuMemExportToShareableHandle (fabric)");
    static_assert(sizeof(handle) == sizeof(mine.fabricHandle), "CUmemFabricHandle is 64 bytes");
    std::memcpy(mine.fabricHandle.data(), &handle, sizeof(handle));
    return;
  }
  int fd = -1;
  d_.check(d_.cuMemExportToShareableHandle(&fd, mc_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           "cuMemExportToShareableHandle (posix_fd)");
  exported_ = UniqueFd(fd);
  mine.pid = options.pid;
  mine.fd = fd;
}

void MulticastGroup::importAndAdd(const Report& creator, const GroupOptions& options) {
  if (request_.rank != 0) {
    if (kind_ == HandleKind::Fabric) {
      CUmemFabricHandle handle{};
      std::memcpy(&handle, creator.fabricHandle.data(), sizeof(handle));
      d_.check(d_.cuMemImportFromShareableHandle(&mc_, &handle, CU_MEM_HANDLE_TYPE_FABRIC),
               "cuMemImportFromShareableHandle (fabric)");
    } else {
      // The copy is this process's to close, once imported.
      UniqueFd local(options.copyFd(creator.pid, creator.fd, request_.describe(0)));
      void* osHandle = reinterpret_cast<void*>(static_cast<uintptr_t>(local.get()));
      d_.check(d_.cuMemImportFromShareableHandle(&mc_, osHandle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
               "cuMemImportFromShareableHandle (posix_fd)");
    }
    held_.allocation("multicast object", mc_);
  }
  d_.check(d_.cuMulticastAddDevice(mc_, primary_->device()), "cuMulticastAddDevice");
}

void MulticastGroup::allocateAndBind() {
  const CUmemAllocationProp prop = allocationProp();
  d_.check(d_.cuMemCreate(&memory_, bytes_, &prop, 0), "cuMemCreate (" + std::to_string(bytes_) + " bytes)");
  held_.allocation("physical memory", memory_);
  d_.check(d_.cuMulticastBindMem(mc_, 0, memory_, 0, bytes_, 0), "cuMulticastBindMem");
  held_.binding(mc_, primary_->device(), bytes_);
}

void MulticastGroup::mapViews() {
  ucView_ = mapView("unicast view", memory_);
  mcView_ = mapView("multicast view", mc_);
}

CUdeviceptr MulticastGroup::mapView(const char* label, CUmemGenericAllocationHandle handle) {
  const std::string suffix = std::string(" (") + label + ")";
  CUdeviceptr ptr = 0;
  d_.check(d_.cuMemAddressReserve(&ptr, bytes_, granularity_, 0, 0), "cuMemAddressReserve" + suffix);
  held_.reservation(label, ptr, bytes_);
  d_.check(d_.cuMemMap(ptr, bytes_, 0, handle, 0), "cuMemMap" + suffix);
  held_.mapping(label, ptr, bytes_);
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = primary_->device();
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  d_.check(d_.cuMemSetAccess(ptr, bytes_, &access, 1), "cuMemSetAccess" + suffix);
  return ptr;
}

}  // namespace plugboard::nvls
