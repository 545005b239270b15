// Whether this rank's driver and GPU can join a multicast group: the
// checks of group_can_create after the gate, repeated by group_create
// before it creates anything. Queries only; nothing is created.
#pragma once

#include <string>

#include "driver.hpp"
#include "handle_kind.hpp"
#include "request.hpp"

namespace plugboard::nvls {

/// 0 when the driver (>= 12.1, every entry present) and GPU request.device
/// (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, a handle kind the preference
/// allows) can join a group of request.nranks >= 2 ranks; else -1 with a
/// one-line reason in *why, e.g. "device 0 does not support multicast
/// (needs NVSwitch / NVLink SHARP, Hopper or later)".
int supportCost(const NvlsDriver& d, const GroupRequest& request, HandlePreference preference, std::string* why);

/// The handle kinds device can export (an attribute the driver does not
/// know reads as "no"), with preference.
HandleSupport queryHandleSupport(const NvlsDriver& d, CUdevice device, HandlePreference preference);

}  // namespace plugboard::nvls
