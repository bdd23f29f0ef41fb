// SPDX-License-Identifier: MIT
// The state behind pmr::Connection and the windows: provider selection, set-up, state machine.
#pragma once

#include "base/environment.hpp"
#include "bootstrap/mpi_process.hpp"
#include "bootstrap/setup_link.hpp"
#include "providers/compiled.hpp"

#include <pmr/connection.hpp>
#include <pmr/window.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace pmr::detail {

/// Bit p is set for every compiled provider p (by enumerator value).
std::uint32_t compiled_mask() noexcept;

/// The provider for a connection to another process, among the providers in `mask`: the one of
/// highest preference (> 0) that reaches `peer`. Nothing if none does.
std::optional<Provider> choose_provider(const PeerInfo& peer, std::uint32_t mask);

/// The provider forced by PMR_PROVIDER for connections to other processes, if any.
/// @throws ArgumentError for an unknown, uncompiled or unsuitable name.
std::optional<Provider> provider_from_environment(const std::string& where);

/// answer_hello() for every connection of this process still waiting for its provider; the
/// progress function of every set-up wait.
void answer_hellos() noexcept;

/// What a connection's hello says.
struct Hello {
    std::int32_t pid = 0;
    std::string node;
    std::uint32_t mask = 0; ///< the peer's compiled providers
    bool forced = false;
    std::optional<Provider> choice; ///< nothing: the peer decides at its handshake
    Blob provider_hello;
};

/// Reads and checks a hello. @throws ProviderError (naming `where`) for a malformed one.
Hello parse_hello(const Blob& message, const std::string& where);

/// What a window's description says.
struct WindowDescription {
    std::uint64_t bytes = 0;
    std::uint64_t element_size = 0;
    std::uint8_t provider = 0;
    Blob provider_part;
};

/// Reads and checks a window's description. @throws ProviderError for a malformed one.
WindowDescription parse_window_description(const Blob& message, const std::string& where);

template <Side S>
using NativeWindow =
    std::conditional_t<S == Side::send, Compiled::SendWindow, Compiled::RecvWindow>;

class ConnectionState {
public:
    ConnectionState(Target target, std::optional<Provider> forced);
    ConnectionState(const ConnectionState&) = delete;
    ConnectionState& operator=(const ConnectionState&) = delete;
    ~ConnectionState();

    /// Completes the handshake (blocks until the peer constructed its side); idempotent.
    void establish();
    bool established() const noexcept { return established_; }
    /// Whether the provider is known (before the handshake, when the peer's node is known).
    bool decided() const noexcept { return decided_; }
    /// The provider if decided; under the set-up lock, since another thread's wait may be
    /// deciding it (answer_hello()).
    std::optional<Provider> chosen_provider() {
        std::lock_guard<std::recursive_mutex> lock(setup_mutex_);
        return decided_ ? std::optional<Provider>(provider_) : std::nullopt;
    }
    Provider provider() const noexcept { return provider_; }
    bool needs_handshake() const noexcept { return link_ != nullptr; }
    std::size_t rails();
    RailInfo rail(std::size_t index);
    bool peer_alive();

    const Target& target() const noexcept { return target_; }
    std::string describe() const;
    std::uint32_t next_window_index(Side side) noexcept {
        return side == Side::send ? send_windows_++ : recv_windows_++;
    }
    bootstrap::SetupLink& link() { return *link_; }
    Compiled::Connection& native() noexcept { return native_; }
    /// A process on this node to watch while waiting for set-up messages (0: none known).
    pid_t watch_pid() const noexcept;

    /// Creates the provider window of `window` now if the provider is known, or when it is.
    template <Side S>
    void attach(WindowState<S>* window) {
        std::lock_guard<std::recursive_mutex> lock(setup_mutex_);
        if (decided_) {
            window->materialize();
        } else if constexpr (S == Side::send) {
            pending_sends_.push_back(window);
        } else {
            pending_recvs_.push_back(window);
        }
    }
    void forget(WindowState<Side::send>* window) noexcept;
    void forget(WindowState<Side::recv>* window) noexcept;

    /// Answers the peer's hello if it has arrived and the provider is not decided yet: decides,
    /// sends the provider's hello and the descriptions of the windows created so far, so that the
    /// peer's first use never waits for this side's first use. Called from every set-up wait of
    /// this process (answer_hellos()). Never throws: a failure is kept for the connection's own
    /// first use. Returns true once nothing is left to answer.
    bool answer_hello() noexcept;

private:
    void decide(Provider provider, const std::string& where);
    /// What the peer's hello said; on an undecided connection, decides and answers.
    void take_hello(const Blob& message);
    void complete_handshake();

    Target target_;
    std::optional<Provider> forced_;
    bool decided_ = false;
    bool established_ = false;
    Provider provider_ = Provider::null;
    std::optional<PeerInfo> peer_;
    std::unique_ptr<bootstrap::SetupLink> link_;
    Compiled::Local local_;
    Compiled::Connection native_;
    std::uint32_t send_windows_ = 0;
    std::uint32_t recv_windows_ = 0;
    std::vector<WindowState<Side::send>*> pending_sends_;
    std::vector<WindowState<Side::recv>*> pending_recvs_;
    std::exception_ptr setup_error_; ///< a failed handshake is final: later calls rethrow it
    // Set-up may be progressed from another connection's wait (answer_hello): the mutex keeps a
    // connection's set-up state consistent when that happens on another thread.
    std::recursive_mutex setup_mutex_;
    bool hello_taken_ = false;
    std::uint32_t peer_mask_ = 0;
    bool peer_forced_ = false;
    std::optional<Provider> peer_choice_;
    Blob peer_provider_hello_;
};

/// Releases library-owned window memory; null for user buffers.
using ReleaseMemory = void (*)(void*) noexcept;

template <Side S>
struct WindowState {
    enum class Phase : std::uint8_t { idle, initialized, posted };

    WindowState(std::shared_ptr<ConnectionState> connection, std::byte* buffer, std::size_t bytes,
                ReleaseMemory release, std::size_t element_size);
    WindowState(const WindowState&) = delete;
    WindowState& operator=(const WindowState&) = delete;
    ~WindowState();

    /// Creates the provider window and sends its description (once the provider is known).
    void materialize();
    /// materialize() for a window created before its connection's provider was decided: a failure
    /// is kept for the window's first use and withdraws its place, telling the peer why.
    void materialize_late() noexcept;
    /// Completes the set-up at the first use: the handshake and the peer's description.
    void activate();
    bool poll();
    /// When the peer's window or process is gone: true if the operation completed anyway (a last
    /// poll), else throws PeerLost. False while the peer is there.
    bool completed_despite_peer_loss();
    /// The slow path of a test() that found nothing: peer loss and PMR_TIMEOUT, every few thousand
    /// calls. True if the operation completed despite a peer loss.
    bool stalled_test();
    /// The rest of a wait() whose first poll found nothing: polls with backoff, watches the peer,
    /// and throws Timeout (naming `limit_name`) once `limit` seconds have passed (0: never).
    void wait_slowly(double limit, const char* limit_name);
    void complete() noexcept;
    [[noreturn]] void order_error(const char* call) const;
    /// Inline: every post runs it; the message is built out of line.
    void check_post_size(std::size_t posted) const {
        if (posted > bytes || posted > peer_bytes) {
            post_size_error(posted);
        }
    }
    [[noreturn]] void post_size_error(std::size_t posted) const;
    /// SendWindow::post(pieces) after the state check and the check of the pieces (RailRange in
    /// bytes, or RailSlice in elements), which tile [0, end) bytes. Defined in window.cpp, its
    /// only user.
    template <class Piece>
    void post_pieces(const Piece* pieces, std::size_t count, std::size_t end);
    std::string describe() const;

    std::shared_ptr<ConnectionState> connection;
    Phase phase = Phase::idle;
    bool finalized = false;          ///< MPI_Finalize ended the provider window
    bool checks = settings().checks; ///< PMR_CHECKS, read once
    std::atomic<bool> busy{false};   ///< in a call (tracked with PMR_CHECKS)
    bool active = false;
    bool keys_taken = false; ///< the provider window was given the peer's description
    bool withdrawn = false;  ///< its place was withdrawn already (materialize_late() failed)
    bool completed_once = false;
    std::uint32_t stalled_tests = 0;
    std::chrono::steady_clock::time_point stalled_since{};
    std::exception_ptr setup_error; ///< a failed set-up is final: later calls rethrow it
    std::uint32_t index;
    std::byte* buffer;
    std::size_t bytes;
    std::size_t element_size;
    std::size_t capacity;       ///< in elements: bytes / element_size, for the checks of posts
    std::size_t peer_bytes = 0; ///< size of the peer's matching window
    bool owned;
    ReleaseMemory release;
    std::size_t rails = 1; ///< of the connection, known once active
    std::string where;
    NativeWindow<S> native;
};

/// Keeps `window` among the live windows, which MPI_Finalize ends (bootstrap::at_finalize), until
/// untrack().
void track(WindowState<Side::send>* window);
void track(WindowState<Side::recv>* window);
void untrack(WindowState<Side::send>* window) noexcept;
void untrack(WindowState<Side::recv>* window) noexcept;

} // namespace pmr::detail
