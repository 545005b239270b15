// A core built without CUDA exports no GPU memory.
#include "plugins/cuda_dmabuf.hpp"

namespace plugboard {

pb_status exportCudaDmabuf(void* ptr, size_t size, int* fd, uint64_t* offset) noexcept {
  return dmabufArgumentsValid(ptr, size, fd, offset) ? PB_ERR_UNSUPPORTED : PB_ERR_INVALID;
}

}  // namespace plugboard
