// Communicator::Impl::startStager: the CUDA staging engine where the core
// was built with CUDA; without it no pair is ever staged (selection never
// offers it), so reaching this is an internal error.
#include "communicator/communicator_impl.hpp"
#include "plugboard/error.hpp"

#if defined(PLUGBOARD_HAVE_CUDA)
#include "gpu/staging_engine.hpp"
#endif

namespace plugboard {

void Communicator::Impl::startStager(const std::shared_ptr<ConnectionImpl>& conn) {
#if defined(PLUGBOARD_HAVE_CUDA)
  conn->stager = std::make_unique<StagingEngine>(*this, *conn);
#else
  throw Error(ErrorCode::Internal, conn->describe() + ": staging CUDA memory needs a core built with CUDA");
#endif
}

}  // namespace plugboard
