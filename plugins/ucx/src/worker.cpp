#include "worker.hpp"

#include "error.hpp"

namespace plugboard::ucx {

ucp_worker_h createWorker(ucp_context_h ucp, std::vector<uint8_t>* address, const std::string& what) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h worker = nullptr;
  ucs_status_t st = ucp_worker_create(ucp, &params, &worker);
  PB_UCX_CHECK(st == UCS_OK, PB_ERR_SYSTEM, ucsText(what + ": ucp_worker_create failed", st));
  ucp_address_t* raw = nullptr;
  size_t length = 0;
  st = ucp_worker_get_address(worker, &raw, &length);
  if (st != UCS_OK) {
    ucp_worker_destroy(worker);
    throw Error(PB_ERR_SYSTEM, ucsText(what + ": ucp_worker_get_address failed", st));
  }
  auto* bytes = reinterpret_cast<const uint8_t*>(raw);
  address->assign(bytes, bytes + length);
  ucp_worker_release_address(worker, raw);
  return worker;
}

void setAmHandler(ucp_worker_h worker, unsigned id, ucp_am_recv_callback_t cb, void* arg, const std::string& what) {
  ucp_am_handler_param_t params{};
  params.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  params.id = id;
  params.flags = UCP_AM_FLAG_WHOLE_MSG;
  params.cb = cb;
  params.arg = arg;
  ucs_status_t st = ucp_worker_set_am_recv_handler(worker, &params);
  PB_UCX_CHECK(st == UCS_OK, PB_ERR_SYSTEM, ucsText(what + ": ucp_worker_set_am_recv_handler failed", st));
}

ucp_ep_params_t peerEndpointParams(const std::vector<uint8_t>& address, ucp_err_handler_cb_t onError, void* arg) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = onError;
  params.err_handler.arg = arg;
  return params;
}

}  // namespace plugboard::ucx
