// SPDX-License-Identifier: MIT
#include "providers/ucx/native.hpp"

#include "providers/ucx/lanes.hpp"

#include "base/backoff.hpp"
#include "base/environment.hpp"
#include "base/error.hpp"
#include "base/shared_memory.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

namespace pmr::detail::ucx {
namespace {

std::string default_todo(ucs_status_t status) {
    switch (status) {
    case UCS_ERR_UNREACHABLE:
        return "The two processes have no UCX transport in common: check UCX_TLS, UCX_NET_DEVICES "
               "and PMR_UCX_DEVICES on both sides (ucx_info -d lists the transports).";
    case UCS_ERR_NO_DEVICE:
        return "Check that the devices in PMR_UCX_DEVICES / UCX_NET_DEVICES exist (ucx_info -d).";
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_EXCEEDS_LIMIT:
        return "Memory or a registration limit is exhausted (ulimit -l, /proc/sys/kernel/shm*).";
    case UCS_ERR_TIMED_OUT:
        return "The peer did not answer in time; is it alive and making progress?";
    default:
        return is_peer_failure(status) ? "Check the peer's output for the reason it died."
                                       : std::string();
    }
}

} // namespace

double teardown_grace_seconds() noexcept {
    try {
        const double timeout = settings().timeout_seconds;
        return timeout > 0 ? std::min(timeout, 10.0) : 10.0;
    } catch (...) { // malformed PMR_TIMEOUT: reported elsewhere
        return 10.0;
    }
}

bool is_peer_failure(ucs_status_t status) noexcept {
    const int s = status;
    return status == UCS_ERR_CONNECTION_RESET || status == UCS_ERR_NOT_CONNECTED ||
           status == UCS_ERR_ENDPOINT_TIMEOUT || status == UCS_ERR_CANCELED ||
           status == UCS_ERR_REJECTED ||
           (s <= UCS_ERR_FIRST_LINK_FAILURE && s >= UCS_ERR_LAST_LINK_FAILURE) ||
           (s <= UCS_ERR_FIRST_ENDPOINT_FAILURE && s >= UCS_ERR_LAST_ENDPOINT_FAILURE);
}

void raise_status(ucs_status_t status, const char* call, const std::string& where,
                  const std::string& todo) {
    const std::string what = std::string(call) + " failed: " + ucs_status_string(status) + " (UCX)";
    const std::string advice = todo.empty() ? default_todo(status) : todo;
    if (is_peer_failure(status)) {
        raise<PeerLost>(what, where, advice);
    }
    if (status == UCS_ERR_TIMED_OUT) {
        raise<Timeout>(what, where, advice);
    }
    raise<ProviderError>(what, where, advice);
}

// -------------------------------------------------------------------------------------------------

Context::Context(const std::string& device, const std::string& where) {
    ucp_config_t* config = nullptr;
    check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read", where);
    struct ConfigRelease {
        ucp_config_t* config;
        ~ConfigRelease() { ucp_config_release(config); }
    } config_release{config};
    if (!device.empty()) {
        check(ucp_config_modify(config, "NET_DEVICES", device.c_str()), "ucp_config_modify", where,
              "PMR_UCX_DEVICES names the device '" + device + "'.");
    }
    // pmr spreads data over rails itself. Within a rail one bandwidth lane keeps UCX 1.13's fence,
    // which orders operations per transport interface only, sufficient for payload-then-sequence.
    check(ucp_config_modify(config, "MAX_RNDV_RAILS", "1"), "ucp_config_modify", where);

    ucp_params_t params{};
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
    params.mt_workers_shared = 1; // windows register memory from any thread
    params.name = "pmr";
    check(ucp_init(&params, config, &handle_), "ucp_init", where);
}

Context::Context(Context&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Context& Context::operator=(Context&& other) noexcept {
    if (this != &other) {
        if (handle_ != nullptr) {
            ucp_cleanup(handle_);
        }
        handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
}

Context::~Context() {
    if (handle_ != nullptr) {
        ucp_cleanup(handle_);
    }
}

// -------------------------------------------------------------------------------------------------

Worker::Worker(std::shared_ptr<Context> context, const std::string& where)
    : context_(std::move(context)) {
    ucp_worker_params_t params{};
    params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    params.thread_mode = UCS_THREAD_MODE_MULTI;
    check(ucp_worker_create(context_->get(), &params, &handle_), "ucp_worker_create", where);
    ucp_worker_attr_t attr{};
    attr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
    if (ucp_worker_query(handle_, &attr) == UCS_OK && attr.thread_mode != UCS_THREAD_MODE_MULTI) {
        thread_safe_ = false;
        debug_log("ucx: this UCX build has no multi-threaded workers; use pmr connections from "
                  "one thread at a time");
    }
    ucp_address_t* address = nullptr;
    std::size_t length = 0;
    const ucs_status_t status = ucp_worker_get_address(handle_, &address, &length);
    if (status != UCS_OK) {
        release();
        raise_status(status, "ucp_worker_get_address", where);
    }
    const auto* bytes = reinterpret_cast<const std::byte*>(address);
    address_.assign(bytes, bytes + length);
    ucp_worker_release_address(handle_, address);
}

Worker::Worker(Worker&& other) noexcept
    : context_(std::move(other.context_)), handle_(std::exchange(other.handle_, nullptr)),
      address_(std::move(other.address_)), thread_safe_(other.thread_safe_) {}

Worker& Worker::operator=(Worker&& other) noexcept {
    if (this != &other) {
        release();
        handle_ = std::exchange(other.handle_, nullptr);
        context_ = std::move(other.context_);
        address_ = std::move(other.address_);
        thread_safe_ = other.thread_safe_;
    }
    return *this;
}

Worker::~Worker() {
    release();
}

void Worker::release() noexcept {
    if (handle_ != nullptr) {
        ucp_worker_destroy(handle_);
        handle_ = nullptr;
    }
}

void Worker::fence(const std::string& where) const {
    check(ucp_worker_fence(handle_), "ucp_worker_fence", where);
}

// -------------------------------------------------------------------------------------------------

Endpoint::Endpoint(std::shared_ptr<Worker> worker, const Blob& peer_address, bool peer_errors,
                   const std::string& where)
    : worker_(std::move(worker)), peer_errors_(peer_errors),
      failure_(std::make_unique<std::atomic<int>>(UCS_OK)), keys_(std::make_unique<KeyCache>()) {
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
    params.err_mode = peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb = &Endpoint::on_error;
    params.err_handler.arg = failure_.get();
    check(ucp_ep_create(worker_->get(), &params, &handle_), "ucp_ep_create", where);
}

std::string Endpoint::info() const {
    char* text = nullptr;
    std::size_t length = 0;
    FILE* stream = open_memstream(&text, &length);
    if (stream == nullptr) {
        return {};
    }
    ucp_ep_print_info(handle_, stream);
    std::fclose(stream);
    const std::unique_ptr<char, void (*)(void*)> owner(text, &std::free);
    return {text, length};
}

bool Endpoint::rma_emulated() const {
    return lanes_emulate_rma(info());
}

bool lanes_emulate_rma(const std::string& info) {
    // UCX 1.13 lists a lane as "lane[0]:  0:tcp/lo.0 md[0] -> md[0]/tcp/sysdev[255] rma_bw#0 am",
    // and the protocols of its lanes for one-sided operations as "put[0]: 0..<short>..(inf)". TCP
    // has neither (UCX emulates puts with active messages; its rma_bw lane serves rendezvous).
    bool native = false;
    bool short_puts_over_tcp = false;
    std::istringstream lines(info);
    for (std::string line; std::getline(lines, line);) {
        if (line.find(" put[") != std::string::npos) {
            native = true;
            continue;
        }
        const std::size_t lane = line.find("lane[");
        if (lane == std::string::npos) {
            continue;
        }
        std::istringstream words(line.substr(lane));
        std::string word;
        std::string transport;
        words >> word >> transport; // "lane[0]:", "0:tcp/lo.0"
        while (words >> word) {
            if (word.substr(0, word.find('#')) == "rma") {
                native = true;
                const std::size_t name = transport.find(':') + 1;
                short_puts_over_tcp = short_puts_over_tcp || transport.compare(name, 3, "tcp") == 0;
            }
        }
    }
    return !native || short_puts_over_tcp;
}

void Endpoint::on_error(void* arg, ucp_ep_h /*endpoint*/, ucs_status_t status) {
    static_cast<std::atomic<int>*>(arg)->store(status, std::memory_order_release);
}

Endpoint::Endpoint(Endpoint&& other) noexcept
    : worker_(std::move(other.worker_)), handle_(std::exchange(other.handle_, nullptr)),
      closing_(std::exchange(other.closing_, nullptr)), peer_errors_(other.peer_errors_),
      failure_(std::move(other.failure_)), keys_(std::move(other.keys_)) {}

Endpoint& Endpoint::operator=(Endpoint&& other) noexcept {
    if (this != &other) {
        release();
        worker_ = std::move(other.worker_);
        handle_ = std::exchange(other.handle_, nullptr);
        closing_ = std::exchange(other.closing_, nullptr);
        peer_errors_ = other.peer_errors_;
        failure_ = std::move(other.failure_);
        keys_ = std::move(other.keys_);
    }
    return *this;
}

Endpoint::~Endpoint() {
    release();
}

void Endpoint::release() noexcept {
    keys_.reset(); // no RemoteKey holds this endpoint any more: every key is the cache's alone
    (void)close(teardown_grace_seconds());
}

void Endpoint::start_close() noexcept {
    if (handle_ == nullptr) {
        return;
    }
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // A forced close needs no answer from the peer, which is what a failed endpoint needs; UCX
    // allows it only in peer error-handling mode.
    params.flags = peer_errors_ && failure() != UCS_OK ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t request = ucp_ep_close_nbx(handle_, &params);
    handle_ = nullptr;
    if (UCS_PTR_IS_PTR(request)) {
        closing_ = request;
    }
}

bool Endpoint::close_done() noexcept {
    if (closing_ == nullptr) {
        return true;
    }
    if (ucp_request_check_status(closing_) == UCS_INPROGRESS) {
        return false;
    }
    ucp_request_free(std::exchange(closing_, nullptr));
    return true;
}

bool Endpoint::close_all(Endpoint* const* endpoints, std::size_t count, double seconds) noexcept {
    for (std::size_t i = 0; i < count; ++i) {
        endpoints[i]->start_close();
    }
    Backoff backoff;
    for (;;) {
        bool pending = false;
        for (std::size_t i = 0; i < count; ++i) {
            pending = !endpoints[i]->close_done() || pending;
        }
        if (!pending) {
            return true;
        }
        for (std::size_t i = 0; i < count; ++i) {
            if (i == 0 || endpoints[i]->worker_ != endpoints[i - 1]->worker_) {
                endpoints[i]->worker_->progress();
            }
        }
        if (backoff.pause() && backoff.elapsed_seconds() > seconds) {
            break;
        }
    }
    debug_log("ucx: closing an endpoint did not complete; abandoning it");
    for (std::size_t i = 0; i < count; ++i) {
        if (endpoints[i]->closing_ != nullptr) {
            ucp_request_free(std::exchange(endpoints[i]->closing_, nullptr));
        }
    }
    return false;
}

// -------------------------------------------------------------------------------------------------

namespace {
// Descriptors a key of shared memory may take while UCX opens or maps it, with room to spare.
constexpr int unpack_descriptors = 8;
} // namespace

MemoryHandle MemoryHandle::allocate(std::shared_ptr<Context> context, std::size_t bytes,
                                    const std::string& where) {
    MemoryHandle m;
    ucp_mem_map_params_t params{};
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                        UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    params.address = nullptr;
    params.length = std::max<std::size_t>(bytes, 1);
    params.flags = UCP_MEM_MAP_ALLOCATE;
    require_descriptors(unpack_descriptors, where);
    check(ucp_mem_map(context->get(), &params, &m.handle_), "ucp_mem_map (allocate)", where);
    m.context_ = std::move(context);
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    check(ucp_mem_query(m.handle_, &attr), "ucp_mem_query", where);
    m.data_ = static_cast<std::byte*>(attr.address);
    m.size_ = bytes;
    std::fill(m.data_, m.data_ + bytes, std::byte{0});
    m.key_ = m.pack_key(KeyLocation{}, where);
    return m;
}

Blob MemoryHandle::pack_key(const KeyLocation& location, const std::string& where) const {
    void* buffer = nullptr;
    std::size_t length = 0;
    check(ucp_rkey_pack(context_->get(), handle_, &buffer, &length), "ucp_rkey_pack", where);
    const auto* packed = static_cast<const std::byte*>(buffer);
    BlobWriter writer;
    writer.put(location);
    Blob key = writer.take();
    key.insert(key.end(), packed, packed + length);
    ucp_rkey_buffer_release(buffer);
    return key;
}

MemoryHandle MemoryHandle::map(std::shared_ptr<Context> context, void* address, std::size_t bytes,
                               const std::string& where, const KeyLocation& location,
                               void (*free_block)(void*) noexcept) {
    MemoryHandle m;
    ucp_mem_map_params_t params{};
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    params.address = address;
    params.length = bytes;
    check(ucp_mem_map(context->get(), &params, &m.handle_), "ucp_mem_map (register)", where);
    m.context_ = std::move(context);
    m.data_ = static_cast<std::byte*>(address);
    m.size_ = bytes;
    m.key_ = m.pack_key(location, where);
    m.free_block_ = free_block; // only now: a failure above leaves the block to the caller
    return m;
}

MemoryHandle MemoryHandle::block(std::shared_ptr<const MemoryHandle> whole, std::byte* data,
                                 std::size_t bytes, void (*free_block)(void*) noexcept,
                                 const std::string& where) {
    if (whole == nullptr || data < whole->data() || data + bytes > whole->data() + whole->size()) {
        raise<ProviderError>("a block outside its registered segment", where);
    }
    MemoryHandle m;
    m.key_ = whole->key_;
    m.whole_ = std::move(whole);
    m.free_block_ = free_block;
    m.data_ = data;
    m.size_ = bytes;
    return m;
}

MemoryHandle::MemoryHandle(MemoryHandle&& other) noexcept
    : context_(std::move(other.context_)), handle_(std::exchange(other.handle_, nullptr)),
      whole_(std::move(other.whole_)), free_block_(std::exchange(other.free_block_, nullptr)),
      data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      key_(std::move(other.key_)) {}

MemoryHandle& MemoryHandle::operator=(MemoryHandle&& other) noexcept {
    if (this != &other) {
        release();
        context_ = std::move(other.context_);
        handle_ = std::exchange(other.handle_, nullptr);
        whole_ = std::move(other.whole_);
        free_block_ = std::exchange(other.free_block_, nullptr);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        key_ = std::move(other.key_);
    }
    return *this;
}

MemoryHandle::~MemoryHandle() {
    release();
}

void MemoryHandle::release() noexcept {
    if (handle_ != nullptr) {
        ucp_mem_unmap(context_->get(), handle_);
        handle_ = nullptr;
    }
    whole_.reset();
    if (free_block_ != nullptr && data_ != nullptr) {
        std::exchange(free_block_, nullptr)(data_);
    }
}

// -------------------------------------------------------------------------------------------------

namespace {

std::uint64_t checksum(const Blob& bytes) noexcept {
    std::uint64_t hash = 0xcbf29ce484222325ULL; // FNV-1a
    for (std::byte b : bytes) {
        hash = (hash ^ static_cast<std::uint64_t>(b)) * 0x100000001b3ULL;
    }
    return hash;
}

} // namespace

void put_key(BlobWriter& writer, const Blob& packed) {
    writer.put(checksum(packed)).put_bytes(packed);
}

Blob get_key(BlobReader& reader, const char* what, const std::string& where) {
    const auto sum = reader.get<std::uint64_t>();
    Blob packed = reader.get_bytes();
    if (checksum(packed) != sum) {
        raise<ProviderError>(std::string("the peer's remote key for its ") + what + " is corrupt",
                             where, "Are both sides running the same pmr version?");
    }
    return packed;
}

/// One unpacked remote key and, where the peer runs on this node, its memory file mapped here.
struct UnpackedKey {
    UnpackedKey() = default;
    UnpackedKey(const UnpackedKey&) = delete;
    UnpackedKey& operator=(const UnpackedKey&) = delete;
    ~UnpackedKey() {
        if (handle != nullptr) {
            ucp_rkey_destroy(handle);
        }
    }

    ucp_rkey_h handle = nullptr;
    KeyLocation location;
    std::shared_ptr<PeerMemory> segments; ///< the peer's arena segments (local peers)
    SharedMapping own_file;               ///< a memory file of one block (local peers)
};

struct Endpoint::KeyCache {
    std::mutex mutex;
    std::map<Blob, std::shared_ptr<const UnpackedKey>> keys;
    int shared_memory = -1; ///< whether UCX itself reaches the peer through shared memory
};

namespace {

// Whether a context has a shared-memory transport of UCX among its resources
// (ucp_context_print_info lists them as "#      resource 4  :  md 3  dev 3  flags --
// posix/memory"): where it has, its memory was mapped by peers on the node before pmr's memory
// files (ucp_rkey_ptr), and is now; with UCX_TLS=tcp it is not.
bool context_shares_memory(ucp_context_h context) {
    char* text = nullptr;
    std::size_t length = 0;
    FILE* stream = open_memstream(&text, &length);
    if (stream == nullptr) {
        return false;
    }
    ucp_context_print_info(context, stream);
    std::fclose(stream);
    const std::unique_ptr<char, void (*)(void*)> owner(text, &std::free);
    const std::string info(text, length);
    for (const char* transport : {"-- posix/", "-- sysv/", "-- xpmem/"}) {
        if (info.find(transport) != std::string::npos) {
            return true;
        }
    }
    return false;
}

} // namespace

std::shared_ptr<const UnpackedKey> Endpoint::remote_key(const Blob& packed, const char* what,
                                                        const std::string& where, pid_t local_pid) {
    // ucp_ep_rkey_unpack trusts the buffer; every packed key starts with a 64-bit memory-domain
    // map.
    if (packed.size() < sizeof(KeyLocation) + sizeof(std::uint64_t)) {
        raise<ProviderError>(std::string("the peer's remote key for its ") + what +
                                 " is malformed (" + std::to_string(packed.size()) + " B)",
                             where, "Are both sides running the same pmr and UCX versions?");
    }
    std::lock_guard<std::mutex> lock(keys_->mutex);
    const auto found = keys_->keys.find(packed);
    if (found != keys_->keys.end()) {
        return found->second;
    }
    auto key = std::make_shared<UnpackedKey>();
    std::memcpy(&key->location, packed.data(), sizeof(KeyLocation));
    // UCX 1.13 crashes (uct_posix_rkey_release) when the shared-memory transport cannot open the
    // peer's segment for lack of descriptors: make sure there are some first.
    require_descriptors(unpack_descriptors, where);
    const ucs_status_t status =
        ucp_ep_rkey_unpack(handle_, packed.data() + sizeof(KeyLocation), &key->handle);
    if (status != UCS_OK) {
        key->handle = nullptr;
        raise_status(
            status,
            (std::string("ucp_ep_rkey_unpack of the peer's remote key for its ") + what).c_str(),
            where,
            "Both sides must run the same UCX version with compatible transports "
            "(UCX_TLS).");
    }
    const KeyLocation& at = key->location;
    if (local_pid > 0 && keys_->shared_memory < 0) {
        keys_->shared_memory = context_shares_memory(worker_->context()->get()) ? 1 : 0;
    }
    if (local_pid > 0 && keys_->shared_memory == 1 && at.file_bytes > 0 && at.fd >= 0) {
        if (at.segment != 0) {
            key->segments = peer_memory(local_pid);
        } else {
            try {
                key->own_file = SharedMapping::open(local_pid, static_cast<int>(at.fd), 0,
                                                    at.file_bytes, where.c_str());
            } catch (const Error& e) { // the put path then
                debug_log(std::string("ucx: the peer's memory file not mapped: ") + e.what());
            }
        }
    }
    // Only keys of arena segments are kept: a segment lives as long as its process, while user
    // memory and blocks with files of their own come and go (and their addresses and descriptors
    // with them).
    if (at.segment != 0) {
        keys_->keys.emplace(packed, key);
    }
    return key;
}

RemoteKey::RemoteKey(std::shared_ptr<Endpoint> endpoint, const Blob& packed, const char* what,
                     const std::string& where, pid_t local_pid)
    : endpoint_(std::move(endpoint)), key_(endpoint_->remote_key(packed, what, where, local_pid)) {}

ucp_rkey_h RemoteKey::get() const noexcept {
    return key_->handle;
}

std::byte* RemoteKey::pointer(std::uint64_t address) const noexcept {
    if (key_ == nullptr) {
        return nullptr;
    }
    const KeyLocation& at = key_->location;
    if (address >= at.base && address - at.base < at.file_bytes) {
        const std::uint64_t offset = address - at.base;
        if (key_->own_file) {
            return key_->own_file.data() + offset;
        }
        if (key_->segments != nullptr) {
            MemoryLocation location;
            location.fd = static_cast<int>(at.fd);
            location.offset = offset;
            location.segment = at.segment;
            location.file_bytes = at.file_bytes;
            try {
                return key_->segments->address(location, 1, "ucx remote key");
            } catch (const std::exception& e) {
                debug_log(std::string("ucx: the peer's arena segment not mapped: ") + e.what());
                return nullptr;
            }
        }
    }
    void* local = nullptr;
    if (key_->handle == nullptr || ucp_rkey_ptr(key_->handle, address, &local) != UCS_OK) {
        return nullptr;
    }
    return static_cast<std::byte*>(local);
}

// -------------------------------------------------------------------------------------------------

Request::Request(ucs_status_ptr_t result, const char* call, const std::string& where) {
    if (UCS_PTR_IS_ERR(result)) {
        raise_status(UCS_PTR_STATUS(result), call, where);
    }
    handle_ = UCS_PTR_IS_PTR(result) ? result : nullptr;
}

Request::Request(std::shared_ptr<LaneSend> send) noexcept : lane_(std::move(send)) {}

Request::Request(Request&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), lane_(std::move(other.lane_)) {}

Request& Request::operator=(Request&& other) noexcept {
    if (this != &other) {
        if (handle_ != nullptr) {
            ucp_request_free(handle_);
        }
        handle_ = std::exchange(other.handle_, nullptr);
        lane_ = std::move(other.lane_);
    }
    return *this;
}

Request::~Request() {
    if (handle_ != nullptr) {
        ucp_request_free(handle_);
    }
}

bool Request::done(const char* call, const std::string& where) {
    if (lane_ != nullptr) {
        int state = lane_->state.load(std::memory_order_acquire);
        if (state == LaneSend::pending) {
            (void)lane_->lane->flush();
            state = lane_->state.load(std::memory_order_acquire);
        }
        if (state == LaneSend::pending) {
            return false;
        }
        lane_.reset();
        if (state == LaneSend::failed) {
            raise<PeerLost>(std::string(call) + " on a TCP lane failed: the connection ended",
                            where,
                            "The peer process died or the network between the hosts failed.");
        }
    }
    if (handle_ == nullptr) {
        return true;
    }
    const ucs_status_t status = ucp_request_check_status(handle_);
    if (status == UCS_INPROGRESS) {
        return false;
    }
    ucp_request_free(std::exchange(handle_, nullptr));
    check(status, call, where);
    return true;
}

Request put(const RemoteKey& key, const void* source, std::size_t bytes, std::uint64_t address,
            const std::string& where) {
    if (bytes == 0) {
        return {};
    }
    ucp_request_param_t params{};
    return {ucp_put_nbx(key.endpoint()->get(), source, bytes, address, key.get(), &params),
            "ucp_put_nbx", where};
}

} // namespace pmr::detail::ucx
