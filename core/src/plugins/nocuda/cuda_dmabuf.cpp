// A core built without CUDA exports no GPU memory.
#include "plugins/cuda_dmabuf.hpp"

namespace plugboard {

pb_status exportCudaDmabuf(void*, size_t, int*, uint64_t*) noexcept { return PB_ERR_UNSUPPORTED; }

}  // namespace plugboard
