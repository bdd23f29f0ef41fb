// SPDX-License-Identifier: MIT
#include "providers/verbs/native.hpp"

#include "base/error.hpp"

#include <cerrno>
#include <cstring>
#include <utility>

namespace pmr::detail::verbs {

void raise_call(const char* call, const std::string& device, int error, const std::string& where,
                const std::string& todo) {
    char buffer[256] = {};
    // GNU strerror_r returns the message pointer, which may or may not be `buffer`.
    const char* text = strerror_r(error, buffer, sizeof buffer);
    raise<ProviderError>(std::string(call) + " on " + (device.empty() ? "no device" : device) +
                             " failed: " + text,
                         where, todo);
}

void check_call(int result, const char* call, const std::string& device, const std::string& where,
                const std::string& todo) {
    if (result == 0) {
        return;
    }
    // Verbs calls return an errno value, or -1 with errno set (some providers, older rdma-core).
    const int error = result > 0 ? result : result == -1 && errno != 0 ? errno : -result;
    raise_call(call, device, error, where, todo);
}

bool is_peer_failure(ibv_wc_status status) noexcept {
    switch (status) {
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_RESP_TIMEOUT_ERR:
    case IBV_WC_WR_FLUSH_ERR: // the queue pair failed before: the first error says why
        return true;
    default:
        return false;
    }
}

void raise_completion(ibv_wc_status status, const char* operation, const std::string& device,
                      const std::string& where) {
    std::string what = std::string(operation) + " on " + device +
                       " failed: " + ibv_wc_status_str(status) + " (status " +
                       std::to_string(static_cast<int>(status)) + ")";
    if (is_peer_failure(status)) {
        raise<PeerLost>(what, where,
                        "The peer process or the path to it is gone (or the peer did not set up "
                        "its side of the connection within about 8 s).");
    }
    raise<ProviderError>(what, where,
                         status == IBV_WC_REM_ACCESS_ERR || status == IBV_WC_LOC_PROT_ERR
                             ? "A write used memory or a key the peer did not register for it; "
                               "please report this as a pmr bug."
                             : "");
}

std::vector<std::string> active_ports() noexcept {
    std::vector<std::string> ports;
    try {
        int count = 0;
        ibv_device** devices = ibv_get_device_list(&count);
        if (devices == nullptr) {
            return ports;
        }
        for (int i = 0; i < count; ++i) {
            ibv_context* context = ibv_open_device(devices[i]);
            if (context == nullptr) {
                continue;
            }
            ibv_device_attr device{};
            if (ibv_query_device(context, &device) == 0) {
                for (std::uint8_t p = 1; p <= device.phys_port_cnt && p != 0; ++p) {
                    ibv_port_attr port{};
                    if (ibv_query_port(context, p, &port) == 0 && port.state == IBV_PORT_ACTIVE) {
                        ports.push_back(std::string(ibv_get_device_name(devices[i])) + ":" +
                                        std::to_string(p));
                    }
                }
            }
            ibv_close_device(context);
        }
        ibv_free_device_list(devices);
    } catch (...) { // NOLINT(bugprone-empty-catch): out of memory: as if there were no device
    }
    return ports;
}

// -------------------------------------------------------------------------------------------------
// Context
// -------------------------------------------------------------------------------------------------

Context::Context(const std::string& device, const std::string& where) : device_(device) {
    int count = 0;
    ibv_device** devices = ibv_get_device_list(&count);
    if (devices == nullptr) {
        raise_call("ibv_get_device_list", device, errno, where,
                   "Is the RDMA driver loaded (`ibv_devices`)?");
    }
    ibv_device* found = nullptr;
    for (int i = 0; i < count && found == nullptr; ++i) {
        if (device == ibv_get_device_name(devices[i])) {
            found = devices[i];
        }
    }
    if (found != nullptr) {
        handle_.reset(ibv_open_device(found));
    }
    const int error = errno;
    ibv_free_device_list(devices);
    if (found == nullptr) {
        raise<ProviderError>("no RDMA device named '" + device + "'", where,
                             "List the devices with `ibv_devices` and name one in "
                             "PMR_VERBS_DEVICES (device:port).");
    }
    if (!handle_) {
        raise_call("ibv_open_device", device, error, where);
    }
}

// -------------------------------------------------------------------------------------------------
// Protection domain, completion queue
// -------------------------------------------------------------------------------------------------

ProtectionDomain::ProtectionDomain(const std::shared_ptr<Context>& context,
                                   const std::string& where)
    : handle_(ibv_alloc_pd(context->get()), context) {
    if (!handle_) {
        raise_call("ibv_alloc_pd", context->device(), errno, where);
    }
}

CompletionQueue::CompletionQueue(const std::shared_ptr<Context>& context, int entries,
                                 const std::string& where)
    : handle_(ibv_create_cq(context->get(), entries, nullptr, nullptr, 0), context) {
    if (!handle_) {
        raise_call("ibv_create_cq", context->device(), errno, where);
    }
}

// -------------------------------------------------------------------------------------------------
// Queue pair
// -------------------------------------------------------------------------------------------------

QueuePair::QueuePair(std::shared_ptr<ProtectionDomain> pd, std::shared_ptr<CompletionQueue> cq,
                     Capacity capacity, const std::string& device, const std::string& where)
    : handle_(nullptr, std::move(pd), std::move(cq)) {
    const auto& domain = handle_.kept<0>();
    const auto& queue = handle_.kept<1>();
    int error = 0;
    for (std::uint32_t inline_bytes = capacity.inline_bytes;; inline_bytes /= 2) {
        ibv_qp_init_attr attr{};
        attr.send_cq = queue->get();
        attr.recv_cq = queue->get();
        attr.qp_type = IBV_QPT_RC;
        attr.sq_sig_all = 0; // selective signalling
        attr.cap.max_send_wr = capacity.send;
        attr.cap.max_recv_wr = capacity.receive;
        attr.cap.max_send_sge = 1;
        attr.cap.max_recv_sge = 1;
        attr.cap.max_inline_data = inline_bytes;
        handle_.reset(ibv_create_qp(domain->get(), &attr));
        if (handle_) {
            inline_bytes_ = attr.cap.max_inline_data;
            return;
        }
        error = errno;
        if (inline_bytes == 0) {
            break;
        }
    }
    raise_call("ibv_create_qp", device, error, where,
               "The device may be out of queue pairs (too many connections?).");
}

// -------------------------------------------------------------------------------------------------
// Memory region
// -------------------------------------------------------------------------------------------------

MemoryRegion::MemoryRegion(const std::shared_ptr<ProtectionDomain>& pd, void* address,
                           std::size_t bytes, const std::string& device, const std::string& where)
    : handle_(
          ibv_reg_mr(pd->get(), address, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
          pd) {
    if (!handle_) {
        raise_call("ibv_reg_mr", device, errno, where,
                   "Registering memory pins it: check `ulimit -l` (locked memory) on every node.");
    }
}

} // namespace pmr::detail::verbs
