/// @file dlpack.hpp
/// Reading a DLPack capsule (the `__dlpack__` exchange of NumPy, PyTorch,
/// CuPy, JAX...) without taking it over: the structs below are the DLPack
/// C ABI (v0.x "dltensor" and v1.x "dltensor_versioned" capsules), written
/// from the specification so the module needs no DLPack header.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

namespace plugboard::python {

/// DLPack's device kinds that this module tells apart (DLDeviceType).
enum DlpackDevice : int32_t { kDlpackCpu = 1, kDlpackCuda = 2, kDlpackCudaHost = 3, kDlpackCudaManaged = 13 };

/// What a capsule's DLTensor describes.
struct DlpackView {
  uintptr_t address = 0;             ///< data + byte_offset: the first element.
  std::vector<int64_t> shape;        ///< Elements per dimension.
  std::vector<int64_t> strides;      ///< In elements; empty: compact row-major.
  uint8_t code = 0;                  ///< DLDataTypeCode (0 int, 1 uint, 2 float, 4 bfloat, 10 fp8 e4m3fn, 12 fp8 e5m2...).
  uint8_t bits = 0;                  ///< Bits per lane.
  uint16_t lanes = 0;                ///< Lanes per element (1 for plain types).
  int32_t deviceType = 0;            ///< DlpackDevice or another DLDeviceType.
  int32_t deviceId = 0;              ///< Device ordinal.
  bool readOnly = false;             ///< v1 capsules' DLPACK_FLAG_BITMASK_READ_ONLY.
};

/// Reads capsule, which stays the producer's (its name and deleter are left
/// alone: the caller keeps it, and the array it came from, alive while the
/// address is used). Throws ValueError naming what for a capsule that is
/// consumed, of another kind, or malformed (negative dimensions, more than
/// 64 of them).
DlpackView readDlpackCapsule(const pybind11::capsule& capsule, const std::string& what);

/// Adds dlpack_view(capsule, what) -> dict to the module.
void bindDlpack(pybind11::module_& m);

}  // namespace plugboard::python
