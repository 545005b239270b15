// UCP calls the context's worker and the lanes' workers make alike.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <string>
#include <vector>

namespace plugboard::ucx {

/// A worker on ucp whose calls its owner's lock serializes; its address
/// goes to *address. what names it in errors. Throws Error.
ucp_worker_h createWorker(ucp_context_h ucp, std::vector<uint8_t>* address, const std::string& what);

/// Registers cb (with arg) for whole active messages of id on worker.
/// Throws Error naming what.
void setAmHandler(ucp_worker_h worker, unsigned id, ucp_am_recv_callback_t cb, void* arg, const std::string& what);

/// Parameters of an endpoint to the worker at address that reports a
/// vanished peer as an error to onError(arg) instead of aborting the
/// process. address must outlive the ucp_ep_create call.
ucp_ep_params_t peerEndpointParams(const std::vector<uint8_t>& address, ucp_err_handler_cb_t onError, void* arg);

}  // namespace plugboard::ucx
