// SPDX-License-Identifier: MIT
// The state behind pmr::Connection and the windows: set-up, provider selection, state machine.
#pragma once

#include "bootstrap/mailbox.hpp"
#include "providers/providers.hpp"

#include <pmr/connection.hpp>
#include <pmr/window.hpp>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>

namespace pmr::detail {

class ConnectionState {
public:
    ConnectionState(const Target& target, std::optional<Provider> forced);
    ConnectionState(const ConnectionState&) = delete;
    ConnectionState& operator=(const ConnectionState&) = delete;
    ~ConnectionState() = default;

    /// Completes the handshake (blocks until the peer constructed its side); idempotent.
    void establish();
    bool established() const noexcept { return established_; }
    Provider provider() const noexcept { return provider_; }
    const std::vector<Provider>& candidates() const noexcept { return offer_.candidates; }
    bool needs_handshake() const noexcept { return handshake_; }
    std::size_t rails();
    bool peer_alive();

    const Target& target() const noexcept { return target_; }
    std::string describe() const;
    std::uint32_t next_window_index(Side side) noexcept {
        return side == Side::send ? send_windows_++ : recv_windows_++;
    }
    bootstrap::Channel& channel() { return *channel_; }
    Compiled::Connection& native() noexcept { return native_; }

private:
    void complete_handshake();

    Target target_;
    bool handshake_ = true;
    bool established_ = false;
    Provider provider_ = Provider::null;
    Offer offer_; // after the fields describe() reads: it is made with describe() in the message
    std::optional<bootstrap::Channel> channel_;
    Compiled::Connection native_;
    std::uint32_t send_windows_ = 0;
    std::uint32_t recv_windows_ = 0;
    std::exception_ptr setup_error_; ///< a failed handshake is final: later calls rethrow it
};

/// Releases library-owned window memory; null for user buffers.
using ReleaseMemory = void (*)(void*) noexcept;

class WindowState {
public:
    WindowState(std::shared_ptr<ConnectionState> connection, Side side, std::byte* buffer,
                std::size_t bytes, ReleaseMemory release, std::size_t element_size);
    WindowState(const WindowState&) = delete;
    WindowState& operator=(const WindowState&) = delete;
    ~WindowState();

    void init();
    void post(std::size_t bytes);
    void post(const RailRange* ranges, std::size_t count);
    bool test();
    void wait();
    std::size_t received_bytes() const;
    std::string describe() const;
    bool owned() const noexcept { return owned_; }

private:
    enum class Phase : std::uint8_t { idle, initialized, posted };

    void activate();
    void check_post_size(std::size_t bytes) const;
    template <class F, class R>
    R on_native(F&& f, R otherwise);
    bool poll();
    /// When the peer's window or process is gone: true if the operation completed anyway (a last
    /// poll), else throws PeerLost. False while the peer is there.
    bool completed_despite_peer_loss();
    [[noreturn]] void order_error(const char* call) const;

    std::shared_ptr<ConnectionState> connection_;
    Side side_;
    Phase phase_ = Phase::idle;
    bool active_ = false;
    bool completed_once_ = false;
    std::uint32_t stalled_tests_ = 0;
    std::exception_ptr setup_error_; ///< a failed set-up is final: later calls rethrow it
    std::uint32_t index_;
    std::byte* buffer_;
    std::size_t bytes_;
    std::size_t element_size_;
    std::size_t peer_bytes_ = 0; ///< size of the peer's matching window
    bool owned_;
    ReleaseMemory release_;
    std::size_t rails_ = 1; ///< of the connection, known once active
    std::string where_;
    std::vector<Compiled::SendWindow> send_candidates_;
    std::vector<Compiled::RecvWindow> recv_candidates_;
    Compiled::SendWindow send_;
    Compiled::RecvWindow recv_;
};

} // namespace pmr::detail
