// SPDX-License-Identifier: MIT
// Owners of the UCX (UCP) handles the ucx provider uses, one class per handle, and the one function
// through which every ucs_status_t becomes a pmr exception.
//
// Every owner is move-only, releases its handle in the destructor and keeps its parent alive
// (worker -> context, endpoint -> worker, remote key -> endpoint, memory -> context), because UCX
// requires children to go first and the provider's objects die in whatever order the user's do.
#pragma once

#include "base/blob.hpp"

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pmr::detail::ucx {

/// Throws the pmr exception that matches `status` (PeerLost for a failed peer or connection,
/// Timeout, ProviderError otherwise) with the usual message: what failed, where, what to do.
[[noreturn]] void raise_status(ucs_status_t status, const char* call, const std::string& where,
                               const std::string& todo = {});

/// Returns if `status` is UCS_OK, throws through raise_status() otherwise.
inline void check(ucs_status_t status, const char* call, const std::string& where,
                  const std::string& todo = {}) {
    if (status != UCS_OK) {
        raise_status(status, call, where, todo);
    }
}

/// Whether `status` says that the peer process or the connection to it is gone.
bool is_peer_failure(ucs_status_t status) noexcept;

/// How long a destructor waits for UCX or the peer before it gives up: destructors must not hang on
/// a dead or stuck peer, and cannot throw. PMR_TIMEOUT if set and shorter, else 10 s.
double teardown_grace_seconds() noexcept;

/// Whether the lanes of an endpoint as ucp_ep_print_info describes them emulate RMA (see
/// Endpoint::rma_emulated()); public for tests.
bool lanes_emulate_rma(const std::string& info);

/// One UCP context: the transports and memory domains of one rail.
class Context {
public:
    /// `device` limits the network devices to one (UCX_NET_DEVICES); empty keeps UCX's choice.
    /// @throws ProviderError if UCX cannot be initialised.
    Context(const std::string& device, const std::string& where);
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
    Context(Context&& other) noexcept;
    Context& operator=(Context&& other) noexcept;
    ~Context();

    ucp_context_h get() const noexcept { return handle_; }

private:
    ucp_context_h handle_ = nullptr;
};

/// One UCP worker, shared by every connection on its rail, thread-safe (UCS_THREAD_MODE_MULTI)
/// because connections may be used from different threads.
class Worker {
public:
    Worker(std::shared_ptr<Context> context, const std::string& where);
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;
    Worker(Worker&& other) noexcept;
    Worker& operator=(Worker&& other) noexcept;
    ~Worker();

    ucp_worker_h get() const noexcept { return handle_; }
    const std::shared_ptr<Context>& context() const noexcept { return context_; }
    /// Packed worker address, for the peer's ucp_ep_create.
    const Blob& address() const noexcept { return address_; }
    unsigned progress() const noexcept { return ucp_worker_progress(handle_); }
    /// Whether UCX made the worker thread-safe (UCS_THREAD_MODE_MULTI, builds with threads).
    bool thread_safe() const noexcept { return thread_safe_; }
    /// Orders the operations issued before it on this worker before those issued after it.
    void fence(const std::string& where) const;

private:
    void release() noexcept;

    std::shared_ptr<Context> context_;
    ucp_worker_h handle_ = nullptr;
    Blob address_;
    bool thread_safe_ = true;
};

/// One UCP endpoint to a peer worker.
class Endpoint {
public:
    /// `peer_errors`: UCP_ERR_HANDLING_MODE_PEER, so a dead peer fails operations instead of
    /// hanging them (UCX then avoids transports that cannot detect it, e.g. shared memory).
    /// @throws ProviderError (UCS_ERR_UNREACHABLE: no transport in common with the peer).
    Endpoint(std::shared_ptr<Worker> worker, const Blob& peer_address, bool peer_errors,
             const std::string& where);
    Endpoint(const Endpoint&) = delete;
    Endpoint& operator=(const Endpoint&) = delete;
    Endpoint(Endpoint&& other) noexcept;
    Endpoint& operator=(Endpoint&& other) noexcept;
    /// Closes the endpoint if close() has not (waiting up to teardown_grace_seconds()).
    ~Endpoint();

    /// Closes the endpoint, flushing what is still in flight (forced after a failure in peer
    /// error-handling mode). A flush may need the peer to make progress (UCX completes the wire-up
    /// handshake then, and over TCP, where UCX emulates puts with active messages, the peer
    /// reports their remote completion), so this waits at most `seconds`. Returns whether the close
    /// completed; if not, the worker must not be destroyed (UCX asserts on a half-wired endpoint).
    bool close(double seconds) noexcept {
        Endpoint* self = this;
        return close_all(&self, 1, seconds);
    }

    /// close() of `count` endpoints at once, progressing the workers of all of them while any
    /// close is pending: a peer that closes its own endpoints in another order waits for this side
    /// to progress the rail at hand, so closing one endpoint after the other, progressing only
    /// its worker, can hold up both sides for the whole grace time. Endpoints of one worker
    /// should be adjacent (each worker is progressed once per adjacent run).
    static bool close_all(Endpoint* const* endpoints, std::size_t count, double seconds) noexcept;

    ucp_ep_h get() const noexcept { return handle_; }
    Worker& worker() const noexcept { return *worker_; }
    /// Whether UCX emulates one-sided operations on this endpoint with messages (TCP: each put
    /// is an active message the peer's progress writes, and a fence waits for the peer's
    /// acknowledgements): no lane does puts natively. From what ucp_ep_print_info lists, because
    /// UCX 1.13 has no query for an endpoint's transports; true if it lists nothing.
    bool rma_emulated() const;
    /// What ucp_ep_print_info says about this endpoint's lanes (empty if it cannot be had).
    std::string info() const;
    /// UCS_OK while healthy; the error UCX reported for this endpoint otherwise.
    ucs_status_t failure() const noexcept {
        return failure_ ? static_cast<ucs_status_t>(failure_->load(std::memory_order_acquire))
                        : UCS_OK;
    }

private:
    static void on_error(void* arg, ucp_ep_h endpoint, ucs_status_t status);
    void release() noexcept;
    /// Starts ucp_ep_close_nbx; `closing_` holds its request if it did not complete at once.
    void start_close() noexcept;
    /// Whether no close is pending (any more); frees the close request once complete.
    bool close_done() noexcept;

    std::shared_ptr<Worker> worker_;
    ucp_ep_h handle_ = nullptr;
    void* closing_ = nullptr;
    bool peer_errors_ = false;
    // Written by UCX's error callback; on the heap so that moves do not invalidate its address.
    std::unique_ptr<std::atomic<int>> failure_;
};

/// Memory mapped into a context: registered (user memory) or allocated by UCX.
class MemoryHandle {
public:
    MemoryHandle() noexcept = default;
    /// UCP_MEM_MAP_ALLOCATE: memory of the transport's choosing. With shared-memory transports it
    /// is a segment other processes on the node can map (ucp_rkey_ptr). The first `zeroed` bytes
    /// are zero (UCX's heap fallback is not); the rest stays untouched, so that it costs no
    /// physical memory until used.
    static MemoryHandle allocate(std::shared_ptr<Context> context, std::size_t bytes,
                                 std::size_t zeroed, const std::string& where);
    /// Registers [address, address + bytes).
    static MemoryHandle map(std::shared_ptr<Context> context, void* address, std::size_t bytes,
                            const std::string& where);
    MemoryHandle(const MemoryHandle&) = delete;
    MemoryHandle& operator=(const MemoryHandle&) = delete;
    MemoryHandle(MemoryHandle&& other) noexcept;
    MemoryHandle& operator=(MemoryHandle&& other) noexcept;
    ~MemoryHandle();

    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    explicit operator bool() const noexcept { return handle_ != nullptr; }
    /// Packed remote key, for the peer's ucp_ep_rkey_unpack.
    Blob pack(const std::string& where) const;

private:
    void release() noexcept;

    std::shared_ptr<Context> context_;
    ucp_mem_h handle_ = nullptr;
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

/// A packed remote key framed with its length and a checksum for the trip to the peer: UCX 1.13
/// trusts the bytes it unpacks and crashes on corrupt ones.
void put_key(BlobWriter& writer, const Blob& packed);
/// Reads a key written by put_key(). @throws ProviderError if it is corrupt.
Blob get_key(BlobReader& reader, const char* what, const std::string& where);

/// A peer's remote key, unpacked on the endpoint that uses it. UCX 1.13 crashes when it cannot
/// unpack a key (e.g. the shared-memory segment behind it is gone), so the provider unpacks only
/// keys whose memory it knows to be alive (see ucx.cpp).
class RemoteKey {
public:
    RemoteKey() noexcept = default;
    /// `what` names the memory in error messages ("receive buffer").
    /// @throws ProviderError if the key is malformed or UCX reports that it cannot unpack it.
    RemoteKey(std::shared_ptr<Endpoint> endpoint, const Blob& packed, const char* what,
              const std::string& where);
    RemoteKey(const RemoteKey&) = delete;
    RemoteKey& operator=(const RemoteKey&) = delete;
    RemoteKey(RemoteKey&& other) noexcept;
    RemoteKey& operator=(RemoteKey&& other) noexcept;
    ~RemoteKey();

    ucp_rkey_h get() const noexcept { return handle_; }
    const std::shared_ptr<Endpoint>& endpoint() const noexcept { return endpoint_; }
    explicit operator bool() const noexcept { return handle_ != nullptr; }
    /// Where the peer's `address` is mapped in this process (ucp_rkey_ptr), or null if the
    /// transport cannot map it (network, user memory).
    std::byte* pointer(std::uint64_t address) const noexcept;

private:
    void release() noexcept;

    std::shared_ptr<Endpoint> endpoint_;
    ucp_rkey_h handle_ = nullptr;
};

/// A non-blocking UCP operation that did not complete at once. Freeing it before completion is
/// allowed: UCX finishes the operation and then releases the request.
struct LaneSend;

class Request {
public:
    Request() noexcept = default;
    /// A send on one of pmr's TCP lanes (lanes.hpp); null: done already.
    explicit Request(std::shared_ptr<LaneSend> send) noexcept;
    /// Takes the result of a ucp_*_nbx call; throws through raise_status() if it is an error.
    Request(ucs_status_ptr_t result, const char* call, const std::string& where);

    Request(const Request&) = delete;
    Request& operator=(const Request&) = delete;
    Request(Request&& other) noexcept;
    Request& operator=(Request&& other) noexcept;
    ~Request();

    /// True once complete; throws through raise_status() if it failed.
    bool done(const char* call, const std::string& where);
    bool pending() const noexcept { return handle_ != nullptr || lane_ != nullptr; }

private:
    void* handle_ = nullptr;
    std::shared_ptr<LaneSend> lane_;
};

/// ucp_put_nbx of `bytes` from `source` to `address` of the key's memory, through the key's
/// endpoint. `source` must stay valid until the returned request is done.
Request put(const RemoteKey& key, const void* source, std::size_t bytes, std::uint64_t address,
            const std::string& where);

} // namespace pmr::detail::ucx
