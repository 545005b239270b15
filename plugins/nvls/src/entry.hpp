// What group_can_create and group_create do, apart from the C glue: the
// gate first (no driver resolved or called when it refuses), then the
// support checks, then the collective creation. The driver table comes
// from a DriverSource called only past the gate, so the plugin resolves
// the real driver lazily and the unit tests pass a fake.
#pragma once

#include <plugboard/transport.h>

#include <functional>
#include <memory>
#include <string>

#include "driver.hpp"
#include "group.hpp"
#include "settings.hpp"

namespace plugboard::nvls {

/// Returns the driver table, resolving it on first use; throws Error
/// (PB_ERR_UNSUPPORTED, "nvls: no CUDA device: ...") where there is none.
using DriverSource = std::function<const NvlsDriver&()>;

/// group_can_create: -1 with *why when the gate refuses ("disabled by
/// NCCL_NVLS_ENABLE=0"), there is no driver or device, or supportCost says
/// no; else 0. Creates nothing. Throws Error(PB_ERR_INVALID) for a bad desc.
int canCreateGroup(const DriverSource& driver, const NvlsSettings& settings, const pb_group_desc_v1* desc,
                   std::string* why);

/// group_create: the gate first (refused: Error(PB_ERR_UNSUPPORTED) with
/// its reason, no driver function called), then the support checks and
/// MulticastGroup::create. A rank that refuses tells the others through
/// the first all_gather when desc carries a usable bootstrap. view must be
/// big enough for every field of pb_group_view_v1 (checked before
/// anything is created) and is filled on success.
std::unique_ptr<MulticastGroup> createGroup(const DriverSource& driver, const NvlsSettings& settings,
                                            const pb_group_desc_v1* desc, const GroupOptions& options,
                                            pb_group_view_v1& view);

}  // namespace plugboard::nvls
