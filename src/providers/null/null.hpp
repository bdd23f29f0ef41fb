// SPDX-License-Identifier: MIT
// The null provider: the peer is MPI_PROC_NULL. Every operation completes at once and a receive
// delivers nothing, as MPI does for MPI_PROC_NULL; no set-up messages are exchanged.
#pragma once

#include "providers/interface.hpp"

namespace pmr::detail {

struct Null {
    static constexpr Provider id = Provider::null;
    static constexpr int preference = 0; // chosen by the target, never by the peer's location
    static bool reaches(const PeerInfo& /*peer*/) noexcept { return false; }
    static constexpr bool handshake = false;
    static constexpr bool has_rails = false;

    struct Local {
        explicit Local(const ConnectionSetup& /*setup*/) noexcept {}
        Blob hello() const { return {}; }
    };

    class Connection {
    public:
        Connection(Local&& /*local*/, const ConnectionSetup& /*setup*/, const PeerInfo& /*peer*/,
                   const Blob& /*hello*/) noexcept {}
        std::size_t rails() const noexcept { return 1; }
        RailInfo rail(std::size_t /*index*/) const { return {}; }
        bool peer_alive() const noexcept { return true; }
    };

    class Window {
    public:
        explicit Window(const WindowSpec& /*spec*/) noexcept {}
        Blob describe() const { return {}; }
        void connect(Connection& /*connection*/, const Blob& /*peer*/,
                     std::size_t /*peer_bytes*/) noexcept {}
        bool test() noexcept { return true; }
        bool peer_gone() const noexcept { return false; }
    };

    class SendWindow : public Window {
    public:
        using Window::Window;
        void post(const std::byte* /*data*/, std::size_t /*bytes*/) noexcept {}
    };

    class RecvWindow : public Window {
    public:
        using Window::Window;
        void init() noexcept {}
        std::size_t received_bytes() const noexcept { return 0; }
    };
};

} // namespace pmr::detail
