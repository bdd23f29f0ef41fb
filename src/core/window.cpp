// SPDX-License-Identifier: MIT
// Windows: construction sends the description, the first init() completes the set-up, and from then
// on init/post/test/wait are a state check plus one switch into the provider.
#include "core/backoff.hpp"
#include "core/error.hpp"
#include "core/shared_memory.hpp"
#include "core/state.hpp"

#include <pmr/memory.hpp>

#include <exception>
#include <type_traits>
#include <utility>

namespace pmr {
namespace detail {
namespace {

template <class T>
constexpr bool is_empty_alternative = std::is_same_v<std::decay_t<T>, std::monostate>;

std::string bytes_text(std::size_t bytes) {
    return std::to_string(bytes) + " B";
}

// Provider held by a candidate window (monostate: none).
template <class Variant>
std::optional<Provider> provider_of(const Variant& window) {
    return std::visit(
        [](const auto& w) -> std::optional<Provider> {
            constexpr int id = Compiled::id_of<std::decay_t<decltype(w)>>();
            if constexpr (id < 0) {
                return std::nullopt;
            } else {
                return static_cast<Provider>(id);
            }
        },
        window);
}

// Tells a candidate window that lost the choice of provider that no peer will ever use it.
template <class Variant>
void discard(Variant& window) noexcept {
    std::visit(
        [](auto& w) {
            if constexpr (check::has_discard<std::decay_t<decltype(w)>>::value) {
                w.discard();
            }
        },
        window);
}

template <class P>
void release_provider_memory(void* pointer) noexcept {
    unregister_owned_block(pointer);
    P::deallocate(pointer);
}

struct OwnedMemory {
    std::byte* data = nullptr;
    ReleaseMemory release = &deallocate_bytes;
};

// Library-owned memory comes from the provider's allocator when the connection can use only that
// provider (UCX memory that a peer on the node maps by ucp_rkey_ptr), and from pmr::allocate
// otherwise, which every provider reaches by its fastest path.
OwnedMemory allocate_owned(const ConnectionState& connection, std::size_t bytes) {
    OwnedMemory memory;
    if (bytes == 0) {
        return memory;
    }
    if (connection.candidates().size() == 1) {
        Compiled::dispatch(connection.candidates().front(), [&](auto provider) {
            using P = decltype(provider);
            if constexpr (check::has_allocator<P>::value) {
                memory.data = static_cast<std::byte*>(P::allocate(bytes, connection.describe()));
                memory.release = &release_provider_memory<P>;
                try {
                    register_owned_block(memory.data, bytes);
                } catch (...) {
                    P::deallocate(memory.data);
                    throw;
                }
            }
        });
    }
    if (memory.data == nullptr) {
        memory.data = static_cast<std::byte*>(allocate_bytes(bytes));
    }
    return memory;
}

} // namespace

std::size_t checked_bytes(std::size_t count, std::size_t element_size) {
    if (element_size != 0 && count > static_cast<std::size_t>(-1) / 2 / element_size) {
        raise<SizeError>("a window of " + std::to_string(count) + " elements of " +
                             std::to_string(element_size) + " B does not fit in memory",
                         "window construction");
    }
    return count * element_size;
}

WindowState::WindowState(std::shared_ptr<ConnectionState> connection, Side side, std::byte* buffer,
                         std::size_t bytes, ReleaseMemory release, std::size_t element_size)
    : connection_(std::move(connection)), side_(side), index_(connection_->next_window_index(side)),
      buffer_(buffer), bytes_(bytes), element_size_(element_size), owned_(release != nullptr),
      release_(release) {
    where_ = describe();
    const WindowSpec spec{buffer_, bytes_, owned_, &where_};
    BlobWriter description;
    description.put<std::uint64_t>(bytes_);
    description.put<std::uint32_t>(static_cast<std::uint32_t>(connection_->candidates().size()));
    for (Provider p : connection_->candidates()) {
        Compiled::dispatch(p, [&](auto provider) {
            using P = decltype(provider);
            if (side_ == Side::send) {
                auto& w =
                    send_candidates_.emplace_back(std::in_place_type<typename P::SendWindow>, spec);
                description.put(p).put_bytes(std::get<typename P::SendWindow>(w).describe());
            } else {
                auto& w =
                    recv_candidates_.emplace_back(std::in_place_type<typename P::RecvWindow>, spec);
                description.put(p).put_bytes(std::get<typename P::RecvWindow>(w).describe());
            }
        });
    }
    if (connection_->needs_handshake()) {
        connection_->channel().send(side_ == Side::send ? bootstrap::Kind::send_window
                                                        : bootstrap::Kind::recv_window,
                                    index_, description.take());
    }
}

WindowState::~WindowState() {
    // Provider windows first: they may still wait for a copy into the buffer to finish.
    send_ = std::monostate{};
    recv_ = std::monostate{};
    if (connection_->established()) {
        const Provider chosen = connection_->provider();
        auto discard_losers = [chosen](auto& candidates) {
            for (auto& candidate : candidates) {
                if (provider_of(candidate) != chosen) {
                    discard(candidate);
                }
            }
        };
        discard_losers(send_candidates_);
        discard_losers(recv_candidates_);
    }
    send_candidates_.clear();
    recv_candidates_.clear();
    if (owned_) {
        release_(buffer_);
    }
}

void WindowState::activate() {
    if (setup_error_) {
        std::rethrow_exception(setup_error_);
    }
    try {
        connection_->establish();
        const Provider chosen = connection_->provider();
        auto take = [&](auto& candidates, auto& target) {
            for (auto& candidate : candidates) {
                if (provider_of(candidate) == chosen) {
                    target = std::move(candidate);
                } else {
                    discard(candidate);
                }
            }
            candidates.clear();
        };
        if (side_ == Side::send) {
            take(send_candidates_, send_);
        } else {
            take(recv_candidates_, recv_);
        }
        where_ = describe();

        Blob peer_blob;
        peer_bytes_ = bytes_;
        if (connection_->needs_handshake()) {
            const Blob message = connection_->channel().receive(
                side_ == Side::send ? bootstrap::Kind::recv_window : bootstrap::Kind::send_window,
                index_, where_);
            BlobReader reader(message);
            peer_bytes_ = static_cast<std::size_t>(reader.get<std::uint64_t>());
            const auto n = reader.get<std::uint32_t>();
            for (std::uint32_t i = 0; i < n; ++i) {
                const auto p = reader.get<Provider>();
                Blob b = reader.get_bytes();
                if (p == chosen) {
                    peer_blob = std::move(b);
                }
            }
        }
        const std::size_t send_bytes = side_ == Side::send ? bytes_ : peer_bytes_;
        const std::size_t recv_bytes = side_ == Side::send ? peer_bytes_ : bytes_;
        if (send_bytes > recv_bytes) {
            raise<SizeError>("the send window (" + bytes_text(send_bytes) +
                                 ") is larger than the peer's receive window (" +
                                 bytes_text(recv_bytes) + ")",
                             where_,
                             "Windows pair in creation order (the k-th SendWindow with the k-th "
                             "RecvWindow of the peer); make the receive window at least as large.");
        }
        Compiled::dispatch(chosen, [&](auto provider) {
            using P = decltype(provider);
            auto& native = std::get<typename P::Connection>(connection_->native());
            if (side_ == Side::send) {
                std::get<typename P::SendWindow>(send_).connect(native, peer_blob);
            } else {
                std::get<typename P::RecvWindow>(recv_).connect(native, peer_blob);
            }
        });
        rails_ = connection_->rails();
        active_ = true;
    } catch (const Timeout&) {
        throw; // the peer may just be slow: a later call can still complete the set-up
    } catch (...) {
        setup_error_ = std::current_exception(); // the messages are consumed: the failure is final
        throw;
    }
}

// Calls f on the provider window of this side; `otherwise` if there is none (never activated).
template <class F, class R>
R WindowState::on_native(F&& f, R otherwise) {
    auto call = [&](auto& w) -> R {
        if constexpr (is_empty_alternative<decltype(w)>) {
            return otherwise;
        } else {
            return f(w);
        }
    };
    return side_ == Side::send ? std::visit(call, send_) : std::visit(call, recv_);
}

bool WindowState::poll() {
    return on_native([](auto& w) { return w.test(); }, true);
}

bool WindowState::completed_despite_peer_loss() {
    const bool window_gone = on_native([](auto& w) { return w.peer_gone(); }, false);
    const bool process_gone = !window_gone && !connection_->peer_alive();
    if (!window_gone && !process_gone) {
        return false;
    }
    // The peer may have delivered its last round and then left: its data is published before its
    // departure, so a final poll decides between "complete" and "lost".
    if (poll()) {
        return true;
    }
    if (window_gone) {
        raise<PeerLost>(
            std::string("the peer destroyed its ") + (side_ == Side::send ? "receive" : "send") +
                " window while this one waited for it",
            where_, "Keep windows alive until both sides have finished their last round.");
    }
    raise<PeerLost>("the peer process exited while this window waited for it", where_,
                    "Check the peer's output for the reason it died.");
}

void WindowState::init() {
    if (phase_ != Phase::idle) {
        order_error("init");
    }
    if (!active_) {
        activate();
    }
    if (side_ == Side::recv) {
        std::visit(
            [](auto& w) {
                if constexpr (!is_empty_alternative<decltype(w)>) {
                    w.init();
                }
            },
            recv_);
    }
    phase_ = Phase::initialized;
}

void WindowState::check_post_size(std::size_t bytes) const {
    if (bytes > bytes_ || bytes > peer_bytes_) {
        raise<SizeError>("post of " + bytes_text(bytes) + " exceeds " +
                             (bytes > bytes_
                                  ? "this window (" + bytes_text(bytes_) + ")"
                                  : "the peer's receive window (" + bytes_text(peer_bytes_) + ")"),
                         where_, "Post at most the smaller of the two window sizes.");
    }
}

void WindowState::post(std::size_t bytes) {
    if (phase_ != Phase::initialized) {
        order_error("post");
    }
    if (side_ == Side::send) {
        check_post_size(bytes);
        std::visit(
            [&](auto& w) {
                if constexpr (!is_empty_alternative<decltype(w)>) {
                    w.post(buffer_, bytes);
                }
            },
            send_);
    }
    phase_ = Phase::posted;
}

void WindowState::post(const RailRange* ranges, std::size_t count) {
    if (phase_ != Phase::initialized) {
        order_error("post");
    }
    if (ranges == nullptr && count > 0) {
        raise<ArgumentError>(
            "multi-rail post of " + std::to_string(count) + " pieces from a null pointer", where_);
    }
    std::size_t end = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const RailRange& piece = ranges[i];
        if (piece.offset != end) {
            raise<ArgumentError>(
                "piece " + std::to_string(i) + " of a multi-rail post starts at byte " +
                    std::to_string(piece.offset) + ", not at byte " + std::to_string(end) +
                    " where the previous one ended",
                where_, "The pieces must tile the posted bytes in order, from offset 0.");
        }
        if (piece.rail >= rails_) {
            raise<ArgumentError>("piece " + std::to_string(i) +
                                     " of a multi-rail post names rail " +
                                     std::to_string(piece.rail) + ", but the connection has " +
                                     std::to_string(rails_),
                                 where_, "Use rails below Connection::rails().");
        }
        end = piece.bytes > static_cast<std::size_t>(-1) - end ? static_cast<std::size_t>(-1)
                                                               : end + piece.bytes;
    }
    check_post_size(end);
    std::visit(
        [&](auto& w) {
            using W = std::decay_t<decltype(w)>;
            if constexpr (check::has_range_post<W>::value) {
                w.post(buffer_, ranges, count);
            } else if constexpr (!is_empty_alternative<W>) {
                w.post(buffer_, end);
            }
        },
        send_);
    phase_ = Phase::posted;
}

bool WindowState::test() {
    if (phase_ != Phase::posted) {
        order_error("test");
    }
    if (poll()) {
        phase_ = Phase::idle;
        completed_once_ = true;
        stalled_tests_ = 0;
        return true;
    }
    // A caller spinning on test() must also learn that the peer died.
    if ((++stalled_tests_ & 4095U) == 0) {
        bootstrap::progress_sends();
    }
    if ((stalled_tests_ & 4095U) == 0 && completed_despite_peer_loss()) {
        phase_ = Phase::idle;
        completed_once_ = true;
        return true;
    }
    return false;
}

void WindowState::wait() {
    if (phase_ != Phase::posted) {
        order_error("wait");
    }
    if (poll()) { // already complete: the common case, which must not even read the clock
        phase_ = Phase::idle;
        completed_once_ = true;
        return;
    }
    Backoff backoff;
    while (!poll()) {
        if (backoff.pause()) {
            bootstrap::progress_sends();
            if (completed_despite_peer_loss()) {
                break;
            }
            if (backoff.expired()) {
                raise<Timeout>("no completion within PMR_TIMEOUT (" +
                                   std::to_string(settings().timeout_seconds) + " s)",
                               where_,
                               side_ == Side::send
                                   ? "The peer has not called init() on its receive window."
                                   : "The peer has not posted its send window.");
            }
        }
    }
    phase_ = Phase::idle;
    completed_once_ = true;
}

std::size_t WindowState::received_bytes() const {
    if (side_ != Side::recv || !completed_once_) {
        raise<UsageError>("received_bytes() before the first completed receive", where_,
                          "Call it after wait() (or test() returning true).");
    }
    return std::visit(
        [](const auto& w) -> std::size_t {
            if constexpr (is_empty_alternative<decltype(w)>) {
                return 0;
            } else {
                return w.received_bytes();
            }
        },
        recv_);
}

void WindowState::order_error(const char* call) const {
    std::string what = std::string(call) + "() ";
    switch (phase_) {
    case Phase::idle:
        what += std::string(call) == "post" ? "before init()" : "with no transfer in flight";
        break;
    case Phase::initialized:
        what += std::string(call) == "init" ? "called twice" : "before post()";
        break;
    case Phase::posted:
        what += std::string(call) == "post" ? "called twice" : "while a transfer is in flight";
        break;
    }
    raise<UsageError>(what, where_,
                      "Each round is init(), post(), then wait() (or test() until it returns "
                      "true).");
}

std::string WindowState::describe() const {
    return std::string(side_ == Side::send ? "send" : "receive") + " window #" +
           std::to_string(index_) + " (" + bytes_text(bytes_) +
           (element_size_ > 1
                ? " = " + std::to_string(bytes_ / element_size_) + " x " + bytes_text(element_size_)
                : std::string()) +
           (owned_ ? ", library-owned" : ", user buffer") + ") on " + connection_->describe();
}

// -------------------------------------------------------------------------------------------------
// WindowCore: the public face.
// -------------------------------------------------------------------------------------------------

namespace {

const std::shared_ptr<ConnectionState>& state_of(const Connection& connection) {
    if (!connection.state()) {
        raise<UsageError>("window created on a moved-from Connection", "");
    }
    return connection.state();
}

} // namespace

WindowCore::WindowCore(const Connection& connection, Side side, void* buffer, std::size_t bytes,
                       std::size_t element_size) {
    if (buffer == nullptr && bytes > 0) {
        raise<ArgumentError>("null buffer for a window of " + bytes_text(bytes),
                             state_of(connection)->describe(),
                             "Pass a buffer, or use the (connection, count) constructor for "
                             "library-owned memory.");
    }
    state_ = std::make_unique<WindowState>(
        state_of(connection), side, static_cast<std::byte*>(buffer), bytes, nullptr, element_size);
    data_ = static_cast<std::byte*>(buffer);
    bytes_ = bytes;
}

WindowCore::WindowCore(const Connection& connection, Side side, std::size_t bytes,
                       std::size_t element_size) {
    const auto& state = state_of(connection);
    const OwnedMemory memory = allocate_owned(*state, bytes);
    try {
        state_ = std::make_unique<WindowState>(state, side, memory.data, bytes, memory.release,
                                               element_size);
    } catch (...) {
        memory.release(memory.data);
        throw;
    }
    data_ = memory.data;
    bytes_ = bytes;
}

WindowCore::WindowCore(WindowCore&& other) noexcept
    : state_(std::move(other.state_)), data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

WindowCore& WindowCore::operator=(WindowCore&& other) noexcept {
    state_ = std::move(other.state_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    return *this;
}

WindowCore::~WindowCore() = default;

WindowState& WindowCore::checked() const {
    if (!state_) {
        raise<UsageError>("use of a moved-from window", "");
    }
    return *state_;
}

void WindowCore::init() {
    checked().init();
}
void WindowCore::post() {
    checked().post(bytes_);
}
void WindowCore::post(std::size_t bytes) {
    checked().post(bytes);
}
void WindowCore::post(const RailRange* ranges, std::size_t count) {
    checked().post(ranges, count);
}
void WindowCore::wait() {
    checked().wait();
}
bool WindowCore::test() {
    return checked().test();
}
bool WindowCore::owns_memory() const noexcept {
    return state_ && state_->owned();
}
std::size_t WindowCore::received_bytes() const {
    return checked().received_bytes();
}
std::string WindowCore::describe() const {
    return checked().describe();
}

} // namespace detail
} // namespace pmr
