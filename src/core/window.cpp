// SPDX-License-Identifier: MIT
// Windows: construction sends the description (or, if the connection's provider is not decided
// yet, the connection does when it is), the first init() completes the set-up, and from then on
// init/post/test/wait are a state check plus one switch into the provider.
#include "base/backoff.hpp"
#include "base/error.hpp"
#include "base/shared_memory.hpp"
#include "core/state.hpp"
#include "rails/pieces.hpp"

#include <pmr/memory.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
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

template <Side S>
constexpr bool is_send = S == Side::send;

// Raises the error of piece `i` of a multi-rail post, which does not start where the previous one
// ended (`end`) or names a rail the connection lacks; `unit` is "byte" or "element".
template <class Piece>
[[noreturn]] void piece_error(const Piece& piece, std::size_t i, std::size_t end, std::size_t rails,
                              const char* unit, const std::string& where) {
    if (piece_start(piece) != end) {
        raise<ArgumentError>("piece " + std::to_string(i) + " of a multi-rail post starts at " +
                                 unit + " " + std::to_string(piece_start(piece)) + ", not at " +
                                 unit + " " + std::to_string(end) + " where the previous one ended",
                             where,
                             std::string("The pieces must tile the posted ") + unit +
                                 "s in order, from offset 0.");
    }
    raise<ArgumentError>("piece " + std::to_string(i) + " of a multi-rail post names rail " +
                             std::to_string(piece.rail) + ", but the connection has " +
                             std::to_string(rails),
                         where, "Use rails below Connection::rails().");
}

// Where a multi-rail post ends after piece `i`, which must start at `end` (where the previous
// piece ended) and name an existing rail. Saturates instead of overflowing, so that an absurd
// length fails the size check.
template <class Piece>
std::size_t end_after(const Piece& piece, std::size_t i, std::size_t end, std::size_t rails,
                      const char* unit, const std::string& where) {
    if (piece_start(piece) != end || piece.rail >= rails) {
        piece_error(piece, i, end, rails, unit, where);
    }
    const std::size_t length = piece_length(piece);
    return length > static_cast<std::size_t>(-1) - end ? static_cast<std::size_t>(-1)
                                                       : end + length;
}

[[noreturn]] void null_pieces_error(std::size_t count, const std::string& where) {
    raise<ArgumentError>(
        "multi-rail post of " + std::to_string(count) + " pieces from a null pointer", where);
}

void require_pieces(const void* pieces, std::size_t count, const std::string& where) {
    if (pieces == nullptr && count > 0) {
        null_pieces_error(count, where);
    }
}

// Windows of providers that keep what a peer that has not connected yet may still use (a receive
// window's registered memory, a send window's credit cell) and free it when that peer withdraws.
template <class W, class = void>
struct keeps_for_peer : std::false_type {};
template <class W>
struct keeps_for_peer<W, std::void_t<decltype(std::declval<const W&>().withdrawal_key()),
                                     decltype(W::peer_withdrew(std::uint64_t{}))>>
    : std::true_type {};

template <Side S>
constexpr bootstrap::Kind own_kind =
    is_send<S> ? bootstrap::Kind::send_window : bootstrap::Kind::recv_window;
template <Side S>
constexpr bootstrap::Kind peer_kind =
    is_send<S> ? bootstrap::Kind::recv_window : bootstrap::Kind::send_window;

// A window whose constructor failed withdraws its place in the pairing, carrying the error: the
// peer's matching window then fails at once naming it (ResourceError for a limit) instead of
// waiting for PMR_TIMEOUT, and the later windows of both sides still pair. Connections without
// set-up messages (to this process) have no peer to tell and keep the place free.
void withdraw_failed(ConnectionState& connection, bootstrap::Kind own, std::uint32_t index,
                     const std::exception_ptr& error) noexcept {
    try {
        bootstrap::WithdrawReason reason{bootstrap::WithdrawCause::failed, "an unknown exception"};
        try {
            std::rethrow_exception(error);
        } catch (const ResourceError& e) {
            reason = {bootstrap::WithdrawCause::resource_limit, e.what()};
        } catch (const std::exception& e) {
            reason.message = e.what();
        } catch (...) { // NOLINT(bugprone-empty-catch): the reason says so
        }
        connection.link().withdraw(own, index, {}, reason);
    } catch (...) { // NOLINT(bugprone-empty-catch): the peer then waits until PMR_TIMEOUT
    }
}

// A library-owned window whose memory could not be had: it takes its place all the same and
// withdraws it, as a window that failed inside its provider does.
template <Side S>
void withdraw_unmade(ConnectionState& connection, const std::exception_ptr& error) noexcept {
    if (connection.needs_handshake()) {
        withdraw_failed(connection, own_kind<S>, connection.next_window_index(S), error);
    }
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

// Library-owned memory comes from the provider's allocator when the connection's provider is known
// and has one (UCX memory that a peer on the node maps by ucp_rkey_ptr), and from pmr::allocate
// otherwise, which every provider reaches by its fastest path.
OwnedMemory allocate_owned(const ConnectionState& connection, std::size_t bytes) {
    OwnedMemory memory;
    if (bytes == 0) {
        return memory;
    }
    if (connection.decided()) {
        Compiled::dispatch(connection.provider(), [&](auto provider) {
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
        memory.data = allocate_shared(bytes, connection.describe()); // ResourceError, not bad_alloc
    }
    return memory;
}

template <class Native>
bool poll_native(Native& native) {
    return std::visit(
        [](auto& w) {
            if constexpr (is_empty_alternative<decltype(w)>) {
                return true;
            } else {
                return w.test();
            }
        },
        native);
}

/// Entry of every operation: one load and one branch unless PMR_CHECKS is on or MPI_Finalize ended
/// the window. With PMR_CHECKS, a window in use by two threads at once is a UsageError.
template <Side S>
class UseGuard {
public:
    explicit UseGuard(WindowState<S>& window) {
        if (window.checks || window.finalized) {
            enter(window);
        }
    }
    UseGuard(const UseGuard&) = delete;
    UseGuard& operator=(const UseGuard&) = delete;
    ~UseGuard() {
        if (busy_ != nullptr) {
            busy_->store(false, std::memory_order_release);
        }
    }

private:
    void enter(WindowState<S>& window) {
        if (window.finalized) {
            raise<UsageError>("the window was ended by MPI_Finalize", window.where,
                              "Use windows between MPI_Init and MPI_Finalize.");
        }
        if (window.busy.exchange(true, std::memory_order_acquire)) {
            raise<UsageError>("the window is used by two threads at once", window.where,
                              "A connection and its windows are used by one thread at a time; "
                              "use a connection per thread.");
        }
        busy_ = &window.busy;
    }

    std::atomic<bool>* busy_ = nullptr;
};

} // namespace

WindowDescription parse_window_description(const Blob& message, const std::string& where) {
    BlobReader reader(message, where);
    WindowDescription d;
    d.bytes = reader.get<std::uint64_t>();
    d.element_size = reader.get<std::uint64_t>();
    d.provider = reader.get<std::uint8_t>();
    d.provider_part = reader.get_bytes();
    reader.finish();
    if (d.bytes > std::numeric_limits<std::uint64_t>::max() / 2 || d.element_size == 0 ||
        (d.bytes > 0 && d.bytes % d.element_size != 0)) {
        reader.malformed(std::to_string(d.bytes) + " B in elements of " +
                         std::to_string(d.element_size) + " B");
    }
    return d;
}

std::size_t checked_bytes(std::size_t count, std::size_t element_size) {
    if (element_size != 0 && count > static_cast<std::size_t>(-1) / 2 / element_size) {
        raise<SizeError>("a window of " + std::to_string(count) + " elements of " +
                             std::to_string(element_size) + " B does not fit in memory",
                         "window construction");
    }
    return count * element_size;
}

// -------------------------------------------------------------------------------------------------
// WindowState
// -------------------------------------------------------------------------------------------------

template <Side S>
WindowState<S>::WindowState(std::shared_ptr<ConnectionState> connection_, std::byte* buffer_,
                            std::size_t bytes_, ReleaseMemory release_, std::size_t element_size_)
    : connection(std::move(connection_)), index(connection->next_window_index(S)), buffer(buffer_),
      bytes(bytes_), element_size(element_size_),
      capacity(element_size_ == 0 ? 0 : bytes_ / element_size_), owned(release_ != nullptr),
      release(release_) {
    where = describe();
    try {
        connection->attach(this);
    } catch (...) {
        // The provider window failed (at a limit, typically) after the window took its place.
        if (connection->needs_handshake()) {
            withdraw_failed(*connection, own_kind<S>, index, std::current_exception());
        }
        throw;
    }
    try {
        track(this);
    } catch (...) {
        connection->forget(this);
        throw;
    }
}

template <Side S>
void WindowState<S>::materialize() {
    where = describe();
    const WindowSpec spec{buffer, bytes, owned, &where};
    const Provider provider = connection->provider();
    Blob blob;
    Compiled::dispatch(provider, [&](auto p) {
        using P = decltype(p);
        using W = std::conditional_t<is_send<S>, typename P::SendWindow, typename P::RecvWindow>;
        blob = native.template emplace<W>(spec).describe();
    });
    if (connection->needs_handshake()) {
        connection->link().send(own_kind<S>, index,
                                BlobWriter()
                                    .put<std::uint64_t>(bytes)
                                    .put<std::uint64_t>(element_size)
                                    .put(static_cast<std::uint8_t>(provider))
                                    .put_bytes(blob)
                                    .take());
    }
}

template <Side S>
void WindowState<S>::materialize_late() noexcept {
    try {
        materialize();
    } catch (...) {
        setup_error = std::current_exception();
        native = std::monostate{};
        withdrawn = true;
        withdraw_failed(*connection, own_kind<S>, index, setup_error);
    }
}

template <Side S>
WindowState<S>::~WindowState() {
    untrack(this);
    connection->forget(this);
    // A window that never took the peer's description withdraws: the peer's matching window then
    // fails clearly instead of waiting, and what is kept here for a peer that may still connect
    // (memory, credit cells) is freed once the peer's side is known to be gone unused as well.
    const bool withdraw = !keys_taken && !finalized && !withdrawn && connection->needs_handshake();
    std::function<void()> on_peer_withdrawn;
    if (withdraw) {
        std::visit(
            [&](const auto& w) {
                using W = std::decay_t<decltype(w)>;
                if constexpr (keeps_for_peer<W>::value) {
                    const std::uint64_t key = w.withdrawal_key();
                    on_peer_withdrawn = [key] { W::peer_withdrew(key); };
                }
            },
            native);
    }
    // The provider window first: it may still wait for a copy into the buffer to finish.
    native = std::monostate{};
    if (withdraw) {
        connection->link().withdraw(own_kind<S>, index, std::move(on_peer_withdrawn));
    }
    if (owned) {
        release(buffer);
    }
}

template <Side S>
void WindowState<S>::activate() {
    if (setup_error) {
        std::rethrow_exception(setup_error);
    }
    try {
        connection->establish(); // materializes this window if it waited for the provider
        where = describe();
        Blob peer_blob;
        peer_bytes = bytes;
        if (connection->needs_handshake()) {
            const Blob message = connection->link().receive(
                peer_kind<S>, index, {&where, connection->watch_pid(), &answer_hellos});
            WindowDescription d = parse_window_description(message, where);
            peer_bytes = static_cast<std::size_t>(d.bytes);
            const std::uint64_t peer_element = d.element_size;
            peer_blob = std::move(d.provider_part);
            if (d.provider != static_cast<std::uint8_t>(connection->provider())) {
                raise<ProviderError>("malformed set-up message from the peer: its window uses "
                                     "provider " +
                                         std::string(to_string(static_cast<Provider>(d.provider))),
                                     where, "Are both sides running the same pmr version?");
            }
            if (peer_element != element_size && peer_element > 1 && element_size > 1) {
                raise<ArgumentError>(
                    "the peer's " + std::string(is_send<S> ? "receive" : "send") +
                        " window holds elements of " + bytes_text(peer_element) + ", this one of " +
                        bytes_text(element_size),
                    where,
                    "Paired windows must have the same element type (or one of them bytes, "
                    "e.g. std::byte): check that the k-th windows on both sides match.");
            }
        }
        const std::size_t send_bytes = is_send<S> ? bytes : peer_bytes;
        const std::size_t recv_bytes = is_send<S> ? peer_bytes : bytes;
        if (send_bytes > recv_bytes) {
            raise<SizeError>("the send window (" + bytes_text(send_bytes) +
                                 ") is larger than the peer's receive window (" +
                                 bytes_text(recv_bytes) + ")",
                             where,
                             "Windows pair in creation order (the k-th SendWindow with the k-th "
                             "RecvWindow of the peer); make the receive window at least as large.");
        }
        if (connection->needs_handshake()) {
            connection->link().raise_if_withdrawn(peer_kind<S>, index, where);
        }
        Compiled::dispatch(connection->provider(), [&](auto p) {
            using P = decltype(p);
            using W =
                std::conditional_t<is_send<S>, typename P::SendWindow, typename P::RecvWindow>;
            auto& native_connection = std::get<typename P::Connection>(connection->native());
            keys_taken = true; // from here on the provider may have used the peer's keys
            std::get<W>(native).connect(native_connection, peer_blob, peer_bytes);
        });
        rails = connection->rails();
        active = true;
    } catch (const Timeout&) {
        throw; // the peer may just be slow: a later call can still complete the set-up
    } catch (...) {
        setup_error = std::current_exception(); // the messages are consumed: the failure is final
        throw;
    }
}

template <Side S>
bool WindowState<S>::poll() {
    return poll_native(native);
}

template <Side S>
bool WindowState<S>::completed_despite_peer_loss() {
    const bool window_gone = std::visit(
        [](const auto& w) {
            if constexpr (is_empty_alternative<decltype(w)>) {
                return false;
            } else {
                return w.peer_gone();
            }
        },
        native);
    const bool process_gone = !window_gone && !connection->peer_alive();
    if (!window_gone && !process_gone) {
        return false;
    }
    // The peer may have delivered its last round and then left: its data is published before its
    // departure, so a final poll decides between "complete" and "lost".
    if (poll()) {
        return true;
    }
    if (window_gone) {
        raise<PeerLost>(std::string("the peer destroyed its ") + (is_send<S> ? "receive" : "send") +
                            " window while this one waited for it",
                        where,
                        "Keep windows alive until both sides have finished their last round.");
    }
    raise<PeerLost>("the peer process exited while this window waited for it", where,
                    "Check the peer's output for the reason it died.");
}

template <Side S>
void WindowState<S>::complete() noexcept {
    phase = Phase::idle;
    completed_once = true;
    stalled_tests = 0;
    // Set-up sends that finished since the last set-up call are noticed here (one atomic load when
    // none are in flight), so that once the peers have taken them, the next rounds make no MPI call
    // even when their waits take the slow path.
    bootstrap::progress_sends();
}

template <Side S>
bool WindowState<S>::stalled_test() {
    // Every 4096 fruitless calls: let MPI deliver set-up messages, watch the peer, and time out.
    if ((++stalled_tests & 4095U) != 0) {
        return false;
    }
    bootstrap::progress_sends();
    if (completed_despite_peer_loss()) {
        return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (stalled_tests == 4096) {
        stalled_since = now;
    }
    const double limit = settings().timeout_seconds;
    if (limit > 0 && std::chrono::duration<double>(now - stalled_since).count() >= limit) {
        stalled_tests = 0;
        raise<Timeout>("test() found no completion within PMR_TIMEOUT (" + std::to_string(limit) +
                           " s)",
                       where,
                       is_send<S> ? "The peer has not called init() on its receive window."
                                  : "The peer has not posted its send window.");
    }
    return false;
}

template <Side S>
void WindowState<S>::order_error(const char* call) const {
    std::string what = std::string(call) + "() ";
    switch (phase) {
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
    raise<UsageError>(what, where,
                      "Each round is init(), post(), then wait() (or test() until it returns "
                      "true).");
}

template <Side S>
void WindowState<S>::post_size_error(std::size_t posted) const {
    raise<SizeError>("post of " + bytes_text(posted) + " exceeds " +
                         (posted > bytes
                              ? "this window (" + bytes_text(bytes) + ")"
                              : "the peer's receive window (" + bytes_text(peer_bytes) + ")"),
                     where, "Post at most the smaller of the two window sizes.");
}

template <Side S>
std::string WindowState<S>::describe() const {
    return std::string(is_send<S> ? "send" : "receive") + " window #" + std::to_string(index) +
           " (" + bytes_text(bytes) +
           (element_size > 1
                ? " = " + std::to_string(bytes / element_size) + " x " + bytes_text(element_size)
                : std::string()) +
           (owned ? ", library-owned" : ", user buffer") + ") on " + connection->describe();
}

// -------------------------------------------------------------------------------------------------
// WindowCore: the operations
// -------------------------------------------------------------------------------------------------

namespace {

const std::shared_ptr<ConnectionState>& state_of(const Connection& connection) {
    if (!connection.state()) {
        raise<UsageError>("window created on an empty Connection (default-constructed or moved "
                          "from)",
                          "", "Create windows on a connection made from a Target.");
    }
    return connection.state();
}

} // namespace

template <Side S>
WindowCore<S>::WindowCore() noexcept = default;

template <Side S>
WindowCore<S>::WindowCore(const Connection& connection, void* buffer, std::size_t bytes,
                          std::size_t element_size) {
    const auto& state = state_of(connection);
    if (buffer == nullptr && bytes > 0) {
        raise<ArgumentError>("null buffer for a window of " + bytes_text(bytes), state->describe(),
                             "Pass a buffer, or use the (connection, count) constructor for "
                             "library-owned memory.");
    }
    state_ = std::make_unique<WindowState<S>>(state, static_cast<std::byte*>(buffer), bytes,
                                              nullptr, element_size);
    data_ = static_cast<std::byte*>(buffer);
    bytes_ = bytes;
}

template <Side S>
WindowCore<S>::WindowCore(const Connection& connection, std::size_t bytes,
                          std::size_t element_size) {
    const auto& state = state_of(connection);
    OwnedMemory memory;
    try {
        memory = allocate_owned(*state, bytes);
    } catch (...) {
        withdraw_unmade<S>(*state, std::current_exception());
        throw;
    }
    try {
        state_ = std::make_unique<WindowState<S>>(state, memory.data, bytes, memory.release,
                                                  element_size);
    } catch (...) {
        memory.release(memory.data);
        throw;
    }
    data_ = memory.data;
    bytes_ = bytes;
}

template <Side S>
WindowCore<S>::WindowCore(WindowCore&& other) noexcept
    : state_(std::move(other.state_)), data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

template <Side S>
WindowCore<S>& WindowCore<S>::operator=(WindowCore&& other) noexcept {
    state_ = std::move(other.state_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    return *this;
}

template <Side S>
WindowCore<S>::~WindowCore() = default;

namespace {

[[noreturn]] __attribute__((noinline, cold)) void empty_window_error() {
    raise<UsageError>("use of an empty window (default-constructed or moved from)", "",
                      "Assign a window made on a connection first.");
}

} // namespace

template <Side S>
WindowState<S>& WindowCore<S>::checked() const {
    // Every call starts here: one test, the message out of line.
    if (!state_) {
        empty_window_error();
    }
    return *state_;
}

template <Side S>
void WindowCore<S>::init() {
    WindowState<S>& s = checked();
    const UseGuard<S> guard(s);
    if (s.phase != WindowState<S>::Phase::idle) {
        s.order_error("init");
    }
    if (!s.active) {
        s.activate();
    }
    if constexpr (!is_send<S>) {
        std::visit(
            [](auto& w) {
                if constexpr (!is_empty_alternative<decltype(w)>) {
                    w.init();
                }
            },
            s.native);
    }
    s.phase = WindowState<S>::Phase::initialized;
}

template <Side S>
void WindowCore<S>::post(std::size_t bytes) {
    WindowState<S>& s = checked();
    const UseGuard<S> guard(s);
    if (s.phase != WindowState<S>::Phase::initialized) {
        s.order_error("post");
    }
    if constexpr (is_send<S>) {
        s.check_post_size(bytes);
        std::visit(
            [&](auto& w) {
                if constexpr (!is_empty_alternative<decltype(w)>) {
                    w.post(s.buffer, bytes);
                }
            },
            s.native);
    }
    s.phase = WindowState<S>::Phase::posted;
}

namespace {

// The state checks of a multi-rail post.
template <Side S>
void check_range_post(const WindowState<S>& s) {
    if (s.phase != WindowState<S>::Phase::initialized) {
        s.order_error("post");
    }
    if constexpr (!is_send<S>) {
        raise<UsageError>("multi-rail post on a receive window", s.where,
                          "Receive windows post() without arguments.");
    }
}

} // namespace

template <Side S>
void WindowCore<S>::post(const RailRange* ranges, std::size_t count) {
    WindowState<S>& s = checked();
    const UseGuard<S> guard(s);
    check_range_post(s);
    if constexpr (is_send<S>) {
        require_pieces(ranges, count, s.where);
        std::size_t end = 0;
        for (std::size_t i = 0; i < count; ++i) {
            end = end_after(ranges[i], i, end, s.rails, "byte", s.where);
        }
        s.post_pieces(ranges, count, end);
    }
}

template <Side S>
void WindowCore<S>::post(const RailSlice* slices, std::size_t count) {
    WindowState<S>& s = checked();
    const UseGuard<S> guard(s);
    check_range_post(s);
    if constexpr (is_send<S>) {
        require_pieces(slices, count, s.where);
        std::size_t end = 0;
        for (std::size_t i = 0; i < count; ++i) {
            end = end_after(slices[i], i, end, s.rails, "element", s.where);
        }
        if (end > s.capacity) {
            element_count_error(end);
        }
        s.post_pieces(slices, count, end * s.element_size);
    }
}

template <Side S>
void WindowCore<S>::element_count_error(std::size_t count) const {
    const WindowState<S>& s = checked();
    if (s.phase != WindowState<S>::Phase::initialized) { // the order of post()'s own checks
        s.order_error("post");
    }
    const std::size_t capacity = s.capacity;
    if (s.element_size == 1) { // a byte window (the C API's): speak bytes
        raise<SizeError>("post of " + bytes_text(count) + " exceeds this window (" +
                             bytes_text(capacity) + ")",
                         s.where, "Post at most the window's size.");
    }
    raise<SizeError>("post of " + std::to_string(count) + " elements exceeds this window (" +
                         std::to_string(capacity) + " elements of " + bytes_text(s.element_size) +
                         ")",
                     s.where, "Post at most size() elements.");
}

template <Side S>
template <class Piece>
void WindowState<S>::post_pieces(const Piece* pieces, std::size_t count, std::size_t end) {
    if constexpr (is_send<S>) {
        WindowState<S>& s = *this;
        s.check_post_size(end);
        std::visit(
            [&](auto& w) {
                using W = std::decay_t<decltype(w)>;
                if constexpr (!check::has_range_post<W>::value) {
                    if constexpr (!is_empty_alternative<W>) {
                        w.post(s.buffer, end);
                    }
                } else if constexpr (std::is_same_v<Piece, RailRange>) {
                    w.post(s.buffer, pieces, count);
                } else {
                    w.post(s.buffer, pieces, count, s.element_size);
                }
            },
            s.native);
        s.phase = WindowState<S>::Phase::posted;
    }
}

template <Side S>
bool WindowCore<S>::test() {
    WindowState<S>& s = checked();
    const UseGuard<S> guard(s);
    if (s.phase != WindowState<S>::Phase::posted) {
        s.order_error("test");
    }
    if (s.poll() || s.stalled_test()) {
        s.complete();
        return true;
    }
    return false;
}

template <Side S>
void WindowCore<S>::wait() {
    WindowState<S>& s = checked();
    const UseGuard<S> guard(s);
    if (s.phase != WindowState<S>::Phase::posted) {
        s.order_error("wait");
    }
    if (s.poll()) { // already complete: the common case, which must not even read the clock
        s.complete();
        return;
    }
    s.wait_slowly(settings().timeout_seconds, "PMR_TIMEOUT");
    s.complete();
}

template <Side S>
void WindowCore<S>::wait(double timeout_seconds) {
    WindowState<S>& s = checked();
    const UseGuard<S> guard(s);
    if (!(timeout_seconds > 0)) { // also NaN
        raise<ArgumentError>("wait() with a timeout of " + std::to_string(timeout_seconds) + " s",
                             s.where, "Give a positive timeout, or call wait() for PMR_TIMEOUT's.");
    }
    if (s.phase != WindowState<S>::Phase::posted) {
        s.order_error("wait");
    }
    if (s.poll()) {
        s.complete();
        return;
    }
    s.wait_slowly(timeout_seconds, "the timeout given to wait()");
    s.complete();
}

template <Side S>
void WindowState<S>::wait_slowly(double limit, const char* limit_name) {
    if (poll_briefly([this] { return poll(); })) {
        return;
    }
    Backoff backoff;
    while (!poll()) {
        if (backoff.pause()) {
            bootstrap::progress_sends();
            if (completed_despite_peer_loss()) {
                return;
            }
            if (limit > 0 && backoff.elapsed_seconds() >= limit) {
                raise<Timeout>(std::string("no completion within ") + limit_name + " (" +
                                   std::to_string(limit) + " s)",
                               where,
                               is_send<S> ? "The peer has not called init() on its receive window."
                                          : "The peer has not posted its send window.");
            }
        }
    }
}

template <Side S>
bool WindowCore<S>::posted() const noexcept {
    return state_ && state_->phase == WindowState<S>::Phase::posted;
}

template <Side S>
bool WindowCore<S>::owns_memory() const noexcept {
    return state_ && state_->owned;
}

template <Side S>
std::size_t WindowCore<S>::received_bytes() const {
    const WindowState<S>& s = checked();
    if (!s.completed_once) {
        raise<UsageError>("received_bytes() before the first completed receive", s.where,
                          "Call it after wait() (or test() returning true).");
    }
    if constexpr (is_send<S>) {
        return 0;
    } else {
        return std::visit(
            [](const auto& w) -> std::size_t {
                if constexpr (is_empty_alternative<decltype(w)>) {
                    return 0;
                } else {
                    return w.received_bytes();
                }
            },
            s.native);
    }
}

template <Side S>
std::string WindowCore<S>::describe() const {
    return checked().describe();
}

template class WindowCore<Side::send>;
template class WindowCore<Side::recv>;
template struct WindowState<Side::send>;
template struct WindowState<Side::recv>;

// -------------------------------------------------------------------------------------------------
// Several windows at once
// -------------------------------------------------------------------------------------------------

namespace {

// Calls f(state) with the WindowState of a Waitable, whichever side it is.
template <class F>
decltype(auto) with_state(const Waitable& w, F&& f) {
    if (w.send != nullptr) {
        auto* state = w.send->state();
        if (state == nullptr) {
            raise<UsageError>("wait_all()/test_all() on an empty window", "");
        }
        return f(*state);
    }
    auto* state = w.recv != nullptr ? w.recv->state() : nullptr;
    if (state == nullptr) {
        raise<UsageError>("wait_all()/test_all() on an empty window", "");
    }
    return f(*state);
}

void require_posted(const Waitable* windows, std::size_t count, const char* call) {
    for (std::size_t i = 0; i < count; ++i) {
        with_state(windows[i], [&](auto& s) {
            if (s.phase != std::decay_t<decltype(s)>::Phase::posted) {
                s.order_error(call);
            }
            return true;
        });
    }
}

} // namespace

namespace {

/// wait_all() until `limit` seconds have passed (`limit_name` says whose limit it is).
void wait_all_within(const Waitable* windows, std::size_t count, double limit,
                     const char* limit_name) {
    require_posted(windows, count, "wait");
    std::size_t open = count;
    // Completed windows move to the end of a local order, so that each pass polls only the rest.
    constexpr std::size_t on_stack = 64;
    std::size_t small[on_stack];
    std::vector<std::size_t> large(count > on_stack ? count : 0);
    std::size_t* order = count > on_stack ? large.data() : small;
    for (std::size_t i = 0; i < count; ++i) {
        order[i] = i;
    }
    // Completes the open windows of which `finished` says so and moves them behind the rest.
    auto sweep = [&](auto finished) {
        for (std::size_t k = 0; k < open;) {
            const bool done = with_state(windows[order[k]], [&](auto& s) {
                if (finished(s)) {
                    s.complete();
                    return true;
                }
                return false;
            });
            if (done) {
                std::swap(order[k], order[--open]);
            } else {
                ++k;
            }
        }
    };
    const auto polled = [](auto& s) { return s.poll(); };
    sweep(polled);
    if (open == 0 || poll_briefly([&] {
            sweep(polled);
            return open == 0;
        })) {
        return;
    }
    Backoff backoff;
    for (;;) {
        sweep(polled);
        if (open == 0) {
            return;
        }
        if (!backoff.pause()) {
            continue;
        }
        bootstrap::progress_sends();
        sweep([](auto& s) { return s.completed_despite_peer_loss(); });
        if (open > 0 && limit > 0 && backoff.elapsed_seconds() >= limit) {
            with_state(windows[order[0]], [&](auto& s) -> bool {
                raise<Timeout>("wait_all() found " + std::to_string(open) + " of " +
                                   std::to_string(count) + " windows incomplete after " +
                                   limit_name + " (" + std::to_string(limit) +
                                   " s), among them this one",
                               s.where, "The peers of the incomplete windows have not posted.");
            });
        }
    }
}

} // namespace

void wait_all(const Waitable* windows, std::size_t count) {
    wait_all_within(windows, count, settings().timeout_seconds, "PMR_TIMEOUT");
}

void wait_all(const Waitable* windows, std::size_t count, double timeout_seconds) {
    if (!(timeout_seconds > 0)) { // also NaN
        raise<ArgumentError>("wait_all() with a timeout of " + std::to_string(timeout_seconds) +
                                 " s",
                             "", "Give a positive timeout, or call wait_all() for PMR_TIMEOUT's.");
    }
    wait_all_within(windows, count, timeout_seconds, "the timeout given to wait_all()");
}

bool test_all(const Waitable* windows, std::size_t count) {
    require_posted(windows, count, "test");
    // Every window is polled on every call: stopping at the first unfinished one would never
    // progress the others, and two ranks could each wait for a window that needs the other's.
    bool all = true;
    for (std::size_t i = 0; i < count; ++i) {
        all = with_state(windows[i], [](auto& s) { return s.poll(); }) && all;
    }
    if (!all) {
        // The slow path of one window at a time (round robin by the stall count of the first).
        for (std::size_t i = 0; i < count; ++i) {
            with_state(windows[i], [](auto& s) { return s.stalled_test(); });
        }
        return false;
    }
    for (std::size_t i = 0; i < count; ++i) {
        with_state(windows[i], [](auto& s) {
            s.complete();
            return true;
        });
    }
    return true;
}

} // namespace detail
} // namespace pmr
