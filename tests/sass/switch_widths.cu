// Every SwitchChannel reduce the device API offers (each type/op at 4, 8
// and 16 bytes) and broadcast, compiled so switch_multimem.sh can find the
// multimem instructions in the SASS. Never launched.
#include "plugboard/gpu/switch_channel_device.hpp"

namespace plugboard::sass_check {

template <SwitchType T, SwitchOp Op, int Words>
__global__ void reduceThenBroadcast(SwitchChannelDeviceHandle h) {
  h.broadcast(0, h.reduce<T, Op, Words>(0));
}

template <int Words>
void instantiate(SwitchChannelDeviceHandle h) {
  reduceThenBroadcast<SwitchType::Float32, SwitchOp::Sum, Words><<<1, 1>>>(h);
  reduceThenBroadcast<SwitchType::Float16, SwitchOp::Sum, Words><<<1, 1>>>(h);
  reduceThenBroadcast<SwitchType::Float16, SwitchOp::Min, Words><<<1, 1>>>(h);
  reduceThenBroadcast<SwitchType::Float16, SwitchOp::Max, Words><<<1, 1>>>(h);
  reduceThenBroadcast<SwitchType::BFloat16, SwitchOp::Sum, Words><<<1, 1>>>(h);
  reduceThenBroadcast<SwitchType::BFloat16, SwitchOp::Min, Words><<<1, 1>>>(h);
  reduceThenBroadcast<SwitchType::BFloat16, SwitchOp::Max, Words><<<1, 1>>>(h);
}

void instantiateEveryWidth(SwitchChannelDeviceHandle h) {
  instantiate<1>(h);
  instantiate<2>(h);
  instantiate<4>(h);
}

}  // namespace plugboard::sass_check
