// The native half of the `plugboard` Python package (_plugboard): unique
// ids, launcher information, settings, and a communicator whose host
// collectives take (address, count, type name) triples. The pure-Python
// half (python/plugboard) turns NumPy arrays, buffer-protocol objects and
// torch tensors into those triples and checks them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <tuple>

#include "plugboard/bootstrap.hpp"
#include "plugboard/config.hpp"
#include "plugboard/datatype.hpp"
#include "plugboard/error.hpp"
#include "dlpack.hpp"
#include "py_communicator.hpp"
#if defined(PLUGBOARD_HAVE_CUDA)
#include "py_gpu_collectives.hpp"
#endif

namespace py = pybind11;
using namespace plugboard;
using plugboard::python::Buffer;
using plugboard::python::PyCommunicator;

namespace {

/// (address, element count, type name) as the Python layer passes a buffer.
using BufferTriple = std::tuple<uintptr_t, size_t, std::string>;

Buffer toBuffer(const BufferTriple& t) {
  return Buffer{std::get<0>(t), std::get<1>(t), parseDataType(std::get<2>(t))};
}

UniqueId toUniqueId(const py::bytes& bytes) {
  const std::string s = bytes;
  UniqueId id{};
  if (s.size() != id.bytes.size())
    throw Error(ErrorCode::InvalidUsage, "a unique id is " + std::to_string(id.bytes.size()) + " bytes; got " +
                                             std::to_string(s.size()));
  std::memcpy(id.bytes.data(), s.data(), s.size());
  return id;
}

py::bytes fromUniqueId(const UniqueId& id) { return py::bytes(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size()); }

py::dict settingToDict(const Setting& s) {
  py::dict d;
  d["name"] = s.decl.name;
  d["value"] = s.value;
  d["default"] = s.decl.defaultValue;
  d["source"] = settingSourceName(s.source);
  d["origin"] = s.origin;
  d["doc"] = s.decl.doc;
  return d;
}

/// Raises plugboard.Error (a RuntimeError) with .code set to the error's
/// category name ("timeout", "aborted", ...).
void registerErrors(py::module_& m) {
  // Created once and kept for the life of the process, as Python keeps
  // every class an extension module defines.
  static PyObject* errorType = PyErr_NewException("plugboard.Error", PyExc_RuntimeError, nullptr);
  m.attr("Error") = py::handle(errorType);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      py::object instance = py::handle(errorType)(e.what());
      instance.attr("code") = errorCodeName(e.code());
      PyErr_SetObject(errorType, instance.ptr());
    }
  });
}

/// (address, bytes, struct format) of a buffer-protocol object, for the
/// Python layer: raises ValueError naming `what` when the buffer is not
/// C-contiguous, or read-only while writable is asked. The address stays
/// valid while the caller keeps obj alive (the view is released here).
py::tuple hostBufferOf(const py::handle& obj, const std::string& what, bool writable) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_STRIDES | PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    throw py::type_error(what + " (" + std::string(Py_TYPE(obj.ptr())->tp_name) +
                         ") is neither a NumPy array, a buffer, a CPU tensor nor a DLPack producer");
  }
  const bool contiguous = PyBuffer_IsContiguous(&view, 'C');
  const bool readonly = view.readonly;
  py::tuple out = py::make_tuple(reinterpret_cast<uintptr_t>(view.buf), static_cast<size_t>(view.len),
                                 std::string(view.format ? view.format : "B"), static_cast<size_t>(view.itemsize));
  PyBuffer_Release(&view);
  if (!contiguous) throw py::value_error(what + " is not C-contiguous (np.ascontiguousarray makes a copy that is)");
  if (writable && readonly) throw py::value_error(what + " is read-only but is written");
  return out;
}

void bindModuleFunctions(py::module_& m) {
  m.def("host_buffer", &hostBufferOf, py::arg("obj"), py::arg("what"), py::arg("writable"),
        "(address, bytes, format, itemsize) of a C-contiguous buffer-protocol object.");
  m.def("create_unique_id", [](const std::string& interfaceSpec) { return fromUniqueId(TcpBootstrap::createUniqueId(interfaceSpec)); },
        py::arg("interface") = "", "A new unique id whose root listens on this host (the socket is opened now).");
  m.def("unique_id_from_address",
        [](const std::string& hostPort, const std::string& jobKey) {
          return fromUniqueId(TcpBootstrap::uniqueIdFromAddress(hostPort, jobKey));
        },
        py::arg("address"), py::arg("job_key") = "", "The unique id of a root at a known \"host:port\".");
  m.def("launch_info", [] {
    const LaunchInfo info = launchInfoFromEnvironment();
    py::dict d;
    d["rank"] = info.rank;
    d["size"] = info.nranks;
    d["local_rank"] = info.localRank;
    d["root_address"] = info.rootAddress;
    d["job_key"] = info.jobKey;
    d["source"] = info.source;
    return d;
  }, "Rank, size, local rank and root address from the launcher's environment (torchrun, mpirun, Slurm).");
  m.def("default_settings", [] {
    py::list out;
    for (const Setting& s : Config::fromEnvironment().all()) out.append(settingToDict(s));
    return out;
  }, "The core's settings as this process resolves them (defaults and environment).");
}

void bindCommunicator(py::module_& m) {
  using release = py::call_guard<py::gil_scoped_release>;
  py::class_<PyCommunicator>(m, "_Communicator")
      .def(py::init([](int rank, int nranks, const py::bytes& id, double timeoutSeconds,
                       const std::map<std::string, std::string>& settings) {
             const UniqueId uid = toUniqueId(id);
             const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeoutSeconds * 1000));
             py::gil_scoped_release unlocked;
             return new PyCommunicator(rank, nranks, uid, timeout, settings);
           }),
           py::arg("rank"), py::arg("size"), py::arg("unique_id"), py::arg("timeout"), py::arg("settings"))
      .def_property_readonly("rank", &PyCommunicator::rank)
      .def_property_readonly("size", &PyCommunicator::size)
      .def("all_reduce", [](PyCommunicator& c, const BufferTriple& s, const BufferTriple& r, const std::string& op) {
             c.allReduce(toBuffer(s), toBuffer(r), parseReduceOp(op));
           }, release())
      .def("all_gather", [](PyCommunicator& c, const BufferTriple& s, const BufferTriple& r) {
             c.allGather(toBuffer(s), toBuffer(r));
           }, release())
      .def("reduce_scatter", [](PyCommunicator& c, const BufferTriple& s, const BufferTriple& r, const std::string& op) {
             c.reduceScatter(toBuffer(s), toBuffer(r), parseReduceOp(op));
           }, release())
      .def("broadcast", [](PyCommunicator& c, const BufferTriple& s, const BufferTriple& r, int root) {
             c.broadcast(toBuffer(s), toBuffer(r), root);
           }, release())
      .def("reduce", [](PyCommunicator& c, const BufferTriple& s, const BufferTriple& r, const std::string& op, int root) {
             c.reduce(toBuffer(s), toBuffer(r), parseReduceOp(op), root);
           }, release())
      .def("all_to_all", [](PyCommunicator& c, const BufferTriple& s, const BufferTriple& r) {
             c.allToAll(toBuffer(s), toBuffer(r));
           }, release())
      .def("send", [](PyCommunicator& c, const BufferTriple& b, int peer) { c.send(toBuffer(b), peer); }, release())
      .def("recv", [](PyCommunicator& c, const BufferTriple& b, int peer) { c.recv(toBuffer(b), peer); }, release())
      .def("send_recv", [](PyCommunicator& c, const BufferTriple& s, int sendPeer, const BufferTriple& r, int recvPeer) {
             c.sendRecv(toBuffer(s), sendPeer, toBuffer(r), recvPeer);
           }, release())
      .def("barrier", &PyCommunicator::barrier, release())
      .def("abort", &PyCommunicator::abort, release())
      .def("aborted", [](const PyCommunicator& c) { return c.communicator().aborted(); })
      .def("async_error", [](const PyCommunicator& c) -> py::object {
        auto err = c.asyncError();
        if (!err) return py::none();
        return py::make_tuple(errorCodeName(err->code()), std::string(err->what()));
      })
      .def("report_failure", [](PyCommunicator& c, const std::string& reason) { c.communicator().reportFailure(reason); },
           release())
      .def("peer_failure", [](PyCommunicator& c) -> py::object {
        std::optional<Error> err;
        {
          py::gil_scoped_release unlocked;
          err = c.communicator().peerFailure();
        }
        if (!err) return py::none();
        return py::make_tuple(errorCodeName(err->code()), std::string(err->what()));
      })
      .def("transport_for", [](const PyCommunicator& c, int peer) { return c.communicator().transportFor(peer); })
      .def("selection_reason", [](const PyCommunicator& c, int peer) { return c.communicator().selectionReason(peer); })
      .def("loaded_transports", [](const PyCommunicator& c) { return c.communicator().loadedTransports(); })
      .def("host_of", [](const PyCommunicator& c, int rank) { return c.communicator().hostOf(rank); })
      .def("settings", [](const PyCommunicator& c) {
        py::list out;
        for (const Setting& s : c.communicator().config().all()) out.append(settingToDict(s));
        return out;
      });
}

#if defined(PLUGBOARD_HAVE_CUDA)
void bindGpuCollectives(py::module_& m) {
  using plugboard::python::PyGpuCollectives;
  using release = py::call_guard<py::gil_scoped_release>;
  py::class_<PyGpuCollectives>(m, "_GpuCollectives")
      .def(py::init([](PyCommunicator& c) {
             py::gil_scoped_release unlocked;
             return new PyGpuCollectives(c);
           }),
           py::arg("communicator"), py::keep_alive<1, 2>())
      .def("all_reduce", [](PyGpuCollectives& g, const BufferTriple& s, const BufferTriple& r, const std::string& op,
                            uintptr_t stream) { g.allReduce(toBuffer(s), toBuffer(r), parseReduceOp(op), stream); },
           release())
      .def("all_gather", [](PyGpuCollectives& g, const BufferTriple& s, const BufferTriple& r, uintptr_t stream) {
             g.allGather(toBuffer(s), toBuffer(r), stream);
           }, release())
      .def("reduce_scatter", [](PyGpuCollectives& g, const BufferTriple& s, const BufferTriple& r, const std::string& op,
                                uintptr_t stream) { g.reduceScatter(toBuffer(s), toBuffer(r), parseReduceOp(op), stream); },
           release())
      .def("broadcast", [](PyGpuCollectives& g, const BufferTriple& s, const BufferTriple& r, int root,
                           uintptr_t stream) { g.broadcast(toBuffer(s), toBuffer(r), root, stream); }, release())
      .def("reduce", [](PyGpuCollectives& g, const BufferTriple& s, const BufferTriple& r, const std::string& op, int root,
                        uintptr_t stream) { g.reduce(toBuffer(s), toBuffer(r), parseReduceOp(op), root, stream); },
           release())
      .def("all_to_all", [](PyGpuCollectives& g, const BufferTriple& s, const BufferTriple& r, uintptr_t stream) {
             g.allToAll(toBuffer(s), toBuffer(r), stream);
           }, release())
      .def("send", [](PyGpuCollectives& g, const BufferTriple& b, int peer, uintptr_t stream) {
             g.send(toBuffer(b), peer, stream);
           }, release())
      .def("recv", [](PyGpuCollectives& g, const BufferTriple& b, int peer, uintptr_t stream) {
             g.recv(toBuffer(b), peer, stream);
           }, release())
      .def("synchronize", &PyGpuCollectives::synchronize, release())
      .def("check_errors", &PyGpuCollectives::checkErrors);
}
#endif

}  // namespace

PYBIND11_MODULE(_plugboard, m) {
  m.doc() = "Plugboard's native module; use the plugboard package instead.";
  registerErrors(m);
  bindModuleFunctions(m);
  plugboard::python::bindDlpack(m);
  bindCommunicator(m);
#if defined(PLUGBOARD_HAVE_CUDA)
  bindGpuCollectives(m);
  m.attr("has_cuda") = true;
#else
  m.attr("has_cuda") = false;
#endif
}
