#include "entry.hpp"

#include <cstdint>
#include <optional>

#include "error.hpp"
#include "gate.hpp"
#include "support.hpp"

namespace plugboard::nvls {

namespace {

/// Tells the other ranks that this one refuses (when desc allows an
/// exchange at all), then throws refusal.
[[noreturn]] void refuse(const pb_group_desc_v1* desc, const Error& refusal) {
  std::unique_ptr<Exchange> exchange;
  GroupRequest request;
  try {
    request = GroupRequest::from(desc);
    exchange = std::make_unique<Exchange>(desc->bootstrap, request.rank, request.nranks);
  } catch (const Error&) {  // no usable exchange: the refusal alone
    throw refusal;
  }
  MulticastGroup::refuse(request, *exchange, refusal);
}

}  // namespace

int canCreateGroup(const DriverSource& driver, const NvlsSettings& settings, const pb_group_desc_v1* desc,
                   std::string* why) {
  *why = disabledBy(settings.enable);
  if (!why->empty()) return -1;
  const GroupRequest request = GroupRequest::from(desc);
  try {
    return supportCost(driver(), request, settings.handleType, why);
  } catch (const Error& e) {  // no driver or device here: a reason, not a failure
    *why = e.what();
    return -1;
  }
}

std::unique_ptr<MulticastGroup> createGroup(const DriverSource& driver, const NvlsSettings& settings,
                                            const pb_group_desc_v1* desc, const GroupOptions& options,
                                            pb_group_view_v1& view) {
  const std::string gate = disabledBy(settings.enable);
  if (!gate.empty())
    refuse(desc, Error(PB_ERR_UNSUPPORTED, "nvls group_create: " + gate + " (no multicast object was created)"));
  NVLS_CHECK(PB_HAS_FIELD(&view, pb_group_view_v1, bytes), PB_ERR_INVALID,
             "nvls group_create: pb_group_view_v1 of " + std::to_string(view.struct_size) + " bytes is too short");
  const GroupRequest request = GroupRequest::from(desc);
  Exchange exchange(desc->bootstrap, request.rank, request.nranks);
  // Past the gate: resolve the driver once and check it can do this, or
  // tell the others why not.
  const NvlsDriver* d = nullptr;
  std::optional<Error> refusal;
  try {
    d = &driver();
    std::string why;
    if (supportCost(*d, request, settings.handleType, &why) < 0)
      refusal = Error(PB_ERR_UNSUPPORTED, "nvls group_create: " + why);
  } catch (const Error& e) {
    refusal = e;
  }
  if (refusal) MulticastGroup::refuse(request, exchange, *refusal);

  std::unique_ptr<MulticastGroup> group = MulticastGroup::create(*d, request, exchange, options);
  view.multicast = reinterpret_cast<void*>(static_cast<uintptr_t>(group->multicast()));
  view.unicast = reinterpret_cast<void*>(static_cast<uintptr_t>(group->unicast()));
  view.bytes = group->bytes();
  return group;
}

}  // namespace plugboard::nvls
