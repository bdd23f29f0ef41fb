// SPDX-License-Identifier: MIT
// The null provider: the peer is MPI_PROC_NULL. Every operation completes at once and a receive
// delivers nothing, as MPI does for MPI_PROC_NULL; no set-up messages are exchanged.
#pragma once

#include "providers/interface.hpp"

namespace pmr::detail {

struct Null : StatelessProvider<Provider::null> {
    static constexpr bool handshake = false;

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
