// SPDX-License-Identifier: MIT
// Owners of the ibverbs handles the verbs provider uses, one class per handle, and the functions
// through which every failed verbs call and every failed completion becomes a pmr exception.
//
// Every owner is move-only, releases its handle in the destructor and keeps its parent alive
// (protection domain and completion queue -> device context, queue pair -> protection domain and
// completion queue, memory region -> protection domain), because verbs requires children to be
// destroyed first and the provider's objects die in whatever order the user's do.
#pragma once

#include "base/unique_handle.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pmr::detail::verbs {

/// Throws ProviderError for the failed verbs call `call` on `device` ("mlx5_0:1") with errno
/// value `error`: "ibv_create_qp on mlx5_0:1 failed: Cannot allocate memory [where]. <todo>".
[[noreturn]] void raise_call(const char* call, const std::string& device, int error,
                             const std::string& where, const std::string& todo = {});

/// For calls that return an errno value (ibv_modify_qp, ibv_post_send, ...): returns if `result`
/// is 0, throws through raise_call() otherwise (a negative result or errno when result is -1).
void check_call(int result, const char* call, const std::string& device, const std::string& where,
                const std::string& todo = {});

/// Whether a failed completion means that the peer (or the path to it) is gone, rather than a
/// local or protocol error: retries exhausted, remote aborts, and the flushes that follow them.
bool is_peer_failure(ibv_wc_status status) noexcept;

/// Throws PeerLost or ProviderError (see is_peer_failure) for a failed work request: "RDMA write
/// on mlx5_0:1 failed: transport retry counter exceeded (IBV_WC_RETRY_EXC_ERR 12)".
[[noreturn]] void raise_completion(ibv_wc_status status, const char* operation,
                                   const std::string& device, const std::string& where);

/// The active ports of the devices of this host, as "device:port", in device order. Empty when
/// libibverbs finds no device (no driver, no /sys/class/infiniband). Never throws.
std::vector<std::string> active_ports() noexcept;

/// An open device.
class Context {
public:
    /// @throws ProviderError if no device of that name exists or it cannot be opened.
    Context(const std::string& device, const std::string& where);

    ibv_context* get() const noexcept { return handle_.get(); }
    const std::string& device() const noexcept { return device_; }

private:
    UniqueHandle<ibv_context*, ibv_close_device> handle_;
    std::string device_;
};

class ProtectionDomain {
public:
    ProtectionDomain(const std::shared_ptr<Context>& context, const std::string& where);

    ibv_pd* get() const noexcept { return handle_.get(); }
    const std::shared_ptr<Context>& context() const noexcept { return handle_.kept<0>(); }

private:
    UniqueHandle<ibv_pd*, ibv_dealloc_pd, std::shared_ptr<Context>> handle_;
};

class CompletionQueue {
public:
    CompletionQueue(const std::shared_ptr<Context>& context, int entries, const std::string& where);

    ibv_cq* get() const noexcept { return handle_.get(); }

private:
    UniqueHandle<ibv_cq*, ibv_destroy_cq, std::shared_ptr<Context>> handle_;
};

/// A reliable-connected queue pair whose send and receive completions go to `cq`.
class QueuePair {
public:
    struct Capacity {
        std::uint32_t send = 0;
        std::uint32_t receive = 0;
        std::uint32_t inline_bytes = 0; ///< asked for; the device may grant less (inline_bytes())
    };
    /// Tries smaller inline sizes down to none if the device refuses the one asked for.
    QueuePair(std::shared_ptr<ProtectionDomain> pd, std::shared_ptr<CompletionQueue> cq,
              Capacity capacity, const std::string& device, const std::string& where);

    ibv_qp* get() const noexcept { return handle_.get(); }
    std::uint32_t number() const noexcept { return handle_.get()->qp_num; }
    std::uint32_t inline_bytes() const noexcept { return inline_bytes_; }

private:
    UniqueHandle<ibv_qp*, ibv_destroy_qp, std::shared_ptr<ProtectionDomain>,
                 std::shared_ptr<CompletionQueue>>
        handle_;
    std::uint32_t inline_bytes_ = 0;
};

/// Registered memory, writable by the peers of the protection domain.
class MemoryRegion {
public:
    MemoryRegion() noexcept = default;
    MemoryRegion(const std::shared_ptr<ProtectionDomain>& pd, void* address, std::size_t bytes,
                 const std::string& device, const std::string& where);

    explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
    std::uint32_t lkey() const noexcept { return handle_.get()->lkey; }
    std::uint32_t rkey() const noexcept { return handle_.get()->rkey; }

private:
    UniqueHandle<ibv_mr*, ibv_dereg_mr, std::shared_ptr<ProtectionDomain>> handle_;
};

} // namespace pmr::detail::verbs
