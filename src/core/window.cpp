// SPDX-License-Identifier: MIT
// Windows: construction sends the description, the first init() completes the set-up, and from then
// on init/post/test/wait are a state check plus one switch into the provider.
#include "core/backoff.hpp"
#include "core/error.hpp"
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

std::string bytes_text(std::size_t bytes) { return std::to_string(bytes) + " B"; }

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

} // namespace

std::size_t checked_bytes(std::size_t count, std::size_t element_size) {
    if (element_size != 0 && count > static_cast<std::size_t>(-1) / 2 / element_size) {
        raise<SizeError>("a window of " + std::to_string(count) + " elements of " +
                             std::to_string(element_size) + " B does not fit in memory",
                         "window construction");
    }
    return count * element_size;
}

WindowState::WindowState(std::shared_ptr<ConnectionState> connection, Side side,
                         std::byte* buffer, std::size_t bytes, bool owned,
                         std::size_t element_size)
    : connection_(std::move(connection)), side_(side),
      index_(connection_->next_window_index(side)), buffer_(buffer), bytes_(bytes),
      element_size_(element_size), owned_(owned) {
    where_ = describe();
    const WindowSpec spec{buffer_, bytes_, owned_, &where_};
    BlobWriter description;
    description.put<std::uint64_t>(bytes_);
    description.put<std::uint32_t>(static_cast<std::uint32_t>(connection_->candidates().size()));
    for (Provider p : connection_->candidates()) {
        Compiled::dispatch(p, [&](auto provider) {
            using P = decltype(provider);
            if (side_ == Side::send) {
                auto& w = send_candidates_.emplace_back(std::in_place_type<typename P::SendWindow>,
                                                        spec);
                description.put(p).put_bytes(std::get<typename P::SendWindow>(w).describe());
            } else {
                auto& w = recv_candidates_.emplace_back(std::in_place_type<typename P::RecvWindow>,
                                                        spec);
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
    send_candidates_.clear();
    recv_candidates_.clear();
    if (owned_) {
        deallocate_bytes(buffer_);
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
        active_ = true;
    } catch (...) {
        setup_error_ = std::current_exception();
        throw;
    }
}

bool WindowState::poll() {
    if (side_ == Side::send) {
        return std::visit(
            [](auto& w) {
                if constexpr (is_empty_alternative<decltype(w)>) {
                    return true;
                } else {
                    return w.test();
                }
            },
            send_);
    }
    return std::visit(
        [](auto& w) {
            if constexpr (is_empty_alternative<decltype(w)>) {
                return true;
            } else {
                return w.test();
            }
        },
        recv_);
}

void WindowState::check_peer() {
    const bool gone = side_ == Side::send
                          ? std::visit(
                                [](const auto& w) {
                                    if constexpr (is_empty_alternative<decltype(w)>) {
                                        return false;
                                    } else {
                                        return w.peer_gone();
                                    }
                                },
                                send_)
                          : std::visit(
                                [](const auto& w) {
                                    if constexpr (is_empty_alternative<decltype(w)>) {
                                        return false;
                                    } else {
                                        return w.peer_gone();
                                    }
                                },
                                recv_);
    if (gone) {
        raise<PeerLost>(std::string("the peer destroyed its ") +
                            (side_ == Side::send ? "receive" : "send") +
                            " window while this one waited for it",
                        where_, "Keep windows alive until both sides have finished their last round.");
    }
    if (!connection_->peer_alive()) {
        raise<PeerLost>("the peer process exited while this window waited for it", where_,
                        "Check the peer's output for the reason it died.");
    }
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

void WindowState::post(std::size_t bytes) {
    if (phase_ != Phase::initialized) {
        order_error("post");
    }
    if (side_ == Side::send) {
        if (bytes > bytes_ || bytes > peer_bytes_) {
            raise<SizeError>("post of " + bytes_text(bytes) + " exceeds " +
                                 (bytes > bytes_ ? "this window (" + bytes_text(bytes_) + ")"
                                                 : "the peer's receive window (" +
                                                       bytes_text(peer_bytes_) + ")"),
                             where_, "Post at most the smaller of the two window sizes.");
        }
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
        check_peer();
    }
    return false;
}

void WindowState::wait() {
    if (phase_ != Phase::posted) {
        order_error("wait");
    }
    Backoff backoff;
    while (!poll()) {
        if (backoff.pause()) {
            check_peer();
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
    state_ = std::make_unique<WindowState>(state_of(connection), side,
                                           static_cast<std::byte*>(buffer), bytes, false,
                                           element_size);
    data_ = static_cast<std::byte*>(buffer);
    bytes_ = bytes;
}

WindowCore::WindowCore(const Connection& connection, Side side, std::size_t bytes,
                       std::size_t element_size) {
    const auto& state = state_of(connection);
    auto* memory = bytes > 0 ? static_cast<std::byte*>(allocate_bytes(bytes)) : nullptr;
    try {
        state_ = std::make_unique<WindowState>(state, side, memory, bytes, true, element_size);
    } catch (...) {
        deallocate_bytes(memory);
        throw;
    }
    data_ = memory;
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

void WindowCore::init() { checked().init(); }
void WindowCore::post() { checked().post(bytes_); }
void WindowCore::post(std::size_t bytes) { checked().post(bytes); }
void WindowCore::wait() { checked().wait(); }
bool WindowCore::test() { return checked().test(); }
bool WindowCore::owns_memory() const noexcept { return state_ && state_->owned(); }
std::size_t WindowCore::received_bytes() const { return checked().received_bytes(); }
std::string WindowCore::describe() const { return checked().describe(); }

} // namespace detail
} // namespace pmr
