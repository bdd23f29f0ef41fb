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
#include <sys/types.h>
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

/// A peer's remote key, unpacked once per endpoint (so once per peer worker and rail) and shared
/// by every RemoteKey of it: the blocks of one arena segment share one key, so a peer's windows
/// cost one unpacked key, and at most a mapping, per segment (Endpoint::remote_key()).
struct UnpackedKey;

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
    /// The key `packed` (MemoryHandle::pack()) unpacked on this endpoint: once, then from a cache
    /// (keys of arena segments, which live as long as their process).
    std::shared_ptr<const UnpackedKey> remote_key(const Blob& packed, const char* what,
                                                  const std::string& where, pid_t local_pid);
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
    struct KeyCache;
    std::unique_ptr<KeyCache> keys_; ///< unpacked remote keys, by packed key
};

/// Where registered memory lies in a memory file of the arena (base/shared_memory.hpp), so that a
/// peer on the node maps it itself (PeerMemory) instead of through UCX; travels in front of the
/// packed remote key (MemoryHandle::pack()).
struct KeyLocation {
    std::uint64_t segment = 0;    ///< arena segment; 0: a memory file of the block's own
    std::uint64_t base = 0;       ///< address of the file's first byte in the owner
    std::uint64_t file_bytes = 0; ///< 0: not in a memory file (user memory)
    std::int64_t fd = -1;         ///< the owner's descriptor of the file
};

/// Memory registered with a context: a whole arena segment, a block of one (sharing the segment's
/// registration and remote key), or user memory.
class MemoryHandle {
public:
    MemoryHandle() noexcept = default;
    /// UCP_MEM_MAP_ALLOCATE, zero-filled: memory of the transport's choosing (with shared-memory
    /// transports a segment of its own, which UCX's puts on the node reach natively).
    static MemoryHandle allocate(std::shared_ptr<Context> context, std::size_t bytes,
                                 const std::string& where);
    /// Registers [address, address + bytes); `location`: where it lies in a memory file, if it
    /// does (travels with its key); `free_block`, if given, is called on `address` once the
    /// registration is gone.
    static MemoryHandle map(std::shared_ptr<Context> context, void* address, std::size_t bytes,
                            const std::string& where, const KeyLocation& location = {},
                            void (*free_block)(void*) noexcept = nullptr);
    /// A block of `whole`'s memory, with its key; `free_block` is called on the block when
    /// the handle goes (free_shared for the arena).
    static MemoryHandle block(std::shared_ptr<const MemoryHandle> whole, std::byte* data,
                              std::size_t bytes, void (*free_block)(void*) noexcept,
                              const std::string& where);
    MemoryHandle(const MemoryHandle&) = delete;
    MemoryHandle& operator=(const MemoryHandle&) = delete;
    MemoryHandle(MemoryHandle&& other) noexcept;
    MemoryHandle& operator=(MemoryHandle&& other) noexcept;
    ~MemoryHandle();

    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    explicit operator bool() const noexcept { return handle_ != nullptr || whole_ != nullptr; }
    /// The key for a peer (RemoteKey): the KeyLocation, then what ucp_rkey_pack gives. Packed once
    /// per registration: every block of an arena segment shares its segment's.
    const Blob& pack() const noexcept { return key_; }

private:
    void release() noexcept;
    Blob pack_key(const KeyLocation& location, const std::string& where) const;

    std::shared_ptr<Context> context_;
    ucp_mem_h handle_ = nullptr;
    std::shared_ptr<const MemoryHandle> whole_; ///< a block's segment
    void (*free_block_)(void*) noexcept = nullptr;
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    Blob key_;
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
    /// `what` names the memory in error messages ("receive buffer"); `local_pid`: the peer's
    /// process where it runs on this node (its memory files can be mapped here), else 0.
    /// @throws ProviderError if the key is malformed or UCX reports that it cannot unpack it,
    ///         ResourceError where too few descriptors are left to unpack it safely.
    RemoteKey(std::shared_ptr<Endpoint> endpoint, const Blob& packed, const char* what,
              const std::string& where, pid_t local_pid);

    ucp_rkey_h get() const noexcept;
    const std::shared_ptr<Endpoint>& endpoint() const noexcept { return endpoint_; }
    explicit operator bool() const noexcept { return key_ != nullptr; }
    /// Where the peer's `address` is mapped in this process (its memory file, or ucp_rkey_ptr),
    /// or null if it cannot be mapped here (another node, user memory).
    std::byte* pointer(std::uint64_t address) const noexcept;

private:
    std::shared_ptr<Endpoint> endpoint_;
    std::shared_ptr<const UnpackedKey> key_;
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
