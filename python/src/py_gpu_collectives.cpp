#include "py_gpu_collectives.hpp"

namespace plugboard::python {

PyGpuCollectives::PyGpuCollectives(PyCommunicator& comm)
    : comm_(comm), gpu_(std::make_unique<GpuCollectives>(comm.communicator())) {}

void PyGpuCollectives::allReduce(const Buffer& send, const Buffer& recv, ReduceOp op, uintptr_t stream) {
  requireSameType(at("all_reduce"), send, recv);
  requireCount(at("all_reduce"), "the output", recv, send.count);
  gpu_->allReduce(send.data(), recv.data(), send.count, send.type, op, streamOf(stream));
}

void PyGpuCollectives::allGather(const Buffer& send, const Buffer& recv, uintptr_t stream) {
  requireSameType(at("all_gather"), send, recv);
  requireCount(at("all_gather"), "the output", recv, send.count * comm_.size());
  gpu_->allGather(send.data(), recv.data(), send.count, send.type, streamOf(stream));
}

void PyGpuCollectives::reduceScatter(const Buffer& send, const Buffer& recv, ReduceOp op, uintptr_t stream) {
  requireSameType(at("reduce_scatter"), send, recv);
  requireCount(at("reduce_scatter"), "the input", send, recv.count * comm_.size());
  gpu_->reduceScatter(send.data(), recv.data(), recv.count, recv.type, op, streamOf(stream));
}

void PyGpuCollectives::broadcast(const Buffer& send, const Buffer& recv, int root, uintptr_t stream) {
  requirePeer(at("broadcast"), "root", root);
  requireSameType(at("broadcast"), send, recv);
  requireCount(at("broadcast"), "the output", recv, send.count);
  gpu_->broadcast(send.data(), recv.data(), recv.count, recv.type, root, streamOf(stream));
}

void PyGpuCollectives::reduce(const Buffer& send, const Buffer& recv, ReduceOp op, int root, uintptr_t stream) {
  requirePeer(at("reduce"), "root", root);
  requireSameType(at("reduce"), send, recv);
  requireCount(at("reduce"), "the output", recv, send.count);
  gpu_->reduce(send.data(), recv.data(), send.count, send.type, op, root, streamOf(stream));
}

void PyGpuCollectives::allToAll(const Buffer& send, const Buffer& recv, uintptr_t stream) {
  requireSameType(at("all_to_all"), send, recv);
  requireCount(at("all_to_all"), "the output", recv, send.count);
  requireBlocks(at("all_to_all"), send);
  gpu_->allToAll(send.data(), recv.data(), send.count / comm_.size(), send.type, streamOf(stream));
}

void PyGpuCollectives::send(const Buffer& buf, int peer, uintptr_t stream) {
  requirePeer(at("send"), "peer", peer);
  gpu_->send(buf.data(), buf.count, buf.type, peer, streamOf(stream));
}

void PyGpuCollectives::recv(const Buffer& buf, int peer, uintptr_t stream) {
  requirePeer(at("recv"), "peer", peer);
  gpu_->recv(buf.data(), buf.count, buf.type, peer, streamOf(stream));
}

void PyGpuCollectives::synchronize(uintptr_t stream) { gpu_->synchronize(streamOf(stream)); }

}  // namespace plugboard::python
