#include "dlpack.hpp"

#include <pybind11/stl.h>

#include <string>

namespace py = pybind11;

namespace plugboard::python {
namespace {

// The DLPack C ABI, field for field.
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL: compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};
constexpr uint64_t kReadOnlyFlag = 1;
constexpr int32_t kMaxDimensions = 64;

DlpackView viewOf(const DLTensor& t, const std::string& what) {
  if (t.ndim < 0 || t.ndim > kMaxDimensions)
    throw py::value_error(what + ": the DLPack tensor claims " + std::to_string(t.ndim) + " dimensions");
  if (t.ndim > 0 && !t.shape) throw py::value_error(what + ": the DLPack tensor has dimensions but no shape");
  DlpackView v;
  v.address = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  for (int32_t i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      throw py::value_error(what + ": the DLPack tensor's dimension " + std::to_string(i) + " is " +
                            std::to_string(t.shape[i]));
    v.shape.push_back(t.shape[i]);
    if (t.strides) v.strides.push_back(t.strides[i]);
  }
  v.code = t.dtype.code;
  v.bits = t.dtype.bits;
  v.lanes = t.dtype.lanes;
  v.deviceType = t.device.device_type;
  v.deviceId = t.device.device_id;
  return v;
}

}  // namespace

DlpackView readDlpackCapsule(const py::capsule& capsule, const std::string& what) {
  const char* name = PyCapsule_GetName(capsule.ptr());
  const std::string kind = name ? name : "";
  if (kind == "dltensor_versioned") {
    auto* managed = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), name));
    if (!managed) throw py::error_already_set();
    if (managed->version.major != 1)
      throw py::value_error(what + ": DLPack version " + std::to_string(managed->version.major) + "." +
                            std::to_string(managed->version.minor) + " is not one this module reads (1.x)");
    DlpackView v = viewOf(managed->dl_tensor, what);
    v.readOnly = (managed->flags & kReadOnlyFlag) != 0;
    return v;
  }
  if (kind == "dltensor") {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), name));
    if (!managed) throw py::error_already_set();
    return viewOf(managed->dl_tensor, what);
  }
  if (kind.rfind("used_", 0) == 0)
    throw py::value_error(what + " is a DLPack capsule that was already consumed (each __dlpack__() capsule "
                                 "can be used once)");
  throw py::value_error(what + " is a capsule named '" + kind + "', not a DLPack tensor ('dltensor')");
}

void bindDlpack(py::module_& m) {
  m.def(
      "dlpack_view",
      [](const py::capsule& capsule, const std::string& what) {
        const DlpackView v = readDlpackCapsule(capsule, what);
        py::dict d;
        d["address"] = v.address;
        d["shape"] = py::tuple(py::cast(v.shape));
        d["strides"] = v.strides.empty() ? py::object(py::none()) : py::object(py::tuple(py::cast(v.strides)));
        d["code"] = v.code;
        d["bits"] = v.bits;
        d["lanes"] = v.lanes;
        d["device_type"] = v.deviceType;
        d["device_id"] = v.deviceId;
        d["read_only"] = v.readOnly;
        return d;
      },
      py::arg("capsule"), py::arg("what"),
      "What a DLPack capsule describes (the capsule stays the producer's): address, shape, strides (elements, "
      "None: compact), code, bits, lanes, device_type, device_id, read_only.");
}

}  // namespace plugboard::python
