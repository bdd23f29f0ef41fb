// SPDX-License-Identifier: MIT
// The windows of a rails provider (ucx, verbs, tofu), declared once: the provider names them as its
// SendWindow and RecvWindow (rails::SendWindow<Provider>, rails::RecvWindow<Provider>), and the
// core holds them like any provider's. What a window does is its State's. The provider defines the
// State in its .cpp, as a rails::SendState / rails::RecvState over its transport
// (rails/window_members.hpp) with what it does differently, and instantiates the members there:
//
//   template <> struct rails::Window<Tofu, rails::send>::State : rails::SendState<Transport> {...};
//   template class rails::Window<Tofu, rails::send>;
//   template class rails::SendWindow<Tofu>;
//
// A call goes straight to the State the compiler sees: no virtual functions on the data path.
#pragma once

#include "base/blob.hpp"

#include <pmr/window.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace pmr::detail {

struct WindowSpec; // providers/interface.hpp

namespace rails {

inline constexpr bool send = true;
inline constexpr bool receive = false;

/// What both windows of a rails provider have: their state, its set-up, teardown and tests.
template <class Provider, bool sends>
class Window {
public:
    using Connection = typename Provider::Connection;

    explicit Window(const WindowSpec& spec);
    Window(Window&& other) noexcept;
    Window& operator=(Window&& other) noexcept;
    /// Frees the state, or keeps it if the peer or the device may still touch it.
    ~Window();

    Blob describe() const;
    void connect(Connection& connection, const Blob& peer, std::size_t peer_bytes);
    bool test();
    bool peer_gone() const noexcept;
    /// Where close() keeps what a peer that has not connected may still use (rails::Registry).
    std::uint64_t withdrawal_key() const noexcept;
    /// The peer's window matching window `key` is gone unconnected: free what was kept.
    static void peer_withdrew(std::uint64_t key) noexcept;

    struct State;

protected:
    std::unique_ptr<State> state_;
};

template <class Provider>
class SendWindow : public Window<Provider, send> {
public:
    using Window<Provider, send>::Window;

    void post(const std::byte* data, std::size_t bytes);
    void post(const std::byte* data, const RailRange* ranges, std::size_t count);
    /// post(ranges) with pieces in elements of `element_size` bytes.
    void post(const std::byte* data, const RailSlice* slices, std::size_t count,
              std::size_t element_size);
};

template <class Provider>
class RecvWindow : public Window<Provider, receive> {
public:
    using Window<Provider, receive>::Window;

    void init();
    std::size_t received_bytes() const noexcept;
};

} // namespace rails
} // namespace pmr::detail
