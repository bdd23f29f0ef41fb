// SPDX-License-Identifier: MIT
// The static interface every provider implements, and the check that it does.
//
// A provider P is a type with
//   static constexpr Provider id;
//   static constexpr bool handshake;            // false: no set-up messages at all (null)
//   static Blob hello(const ConnectionSetup&);  // for the peer, sent at construction
//   class Connection {                          // built when the handshake completes
//       Connection(const ConnectionSetup&, const PeerInfo&, const Blob& peer_hello);
//       std::size_t rails() const;
//       bool peer_alive();                      // cheap enough to call every few milliseconds
//   };
//   class SendWindow / RecvWindow {             // nothrow-movable
//       explicit SendWindow(const WindowSpec&); // local resources, at window construction
//       Blob describe() const;                  // what the peer needs, sent at construction
//       void connect(Connection&, const Blob& peer_description);   // at first use
//       bool test();                            // non-blocking progress; true when complete
//       bool peer_gone() const;                 // peer destroyed its window (checked when slow)
//   };
//   SendWindow::post(const std::byte* data, std::size_t bytes);   // starts a transfer
//   RecvWindow::init();                         // grants the sender the buffer
//   RecvWindow::received_bytes() const;
// and may have (detected with the traits below; the core falls back when they are missing)
//   static void* allocate(std::size_t, const std::string& where);  // memory for library-owned
//   static void deallocate(void*) noexcept;     // windows when this is the only candidate provider
//   SendWindow::post(const std::byte*, const RailRange*, std::size_t); // multi-rail; else post(n)
//   SendWindow/RecvWindow::discard() noexcept;  // the connection chose another provider
// The core (src/core/window.cpp) owns the state machine, waiting, deadlines and error context;
// providers only move bytes.
#pragma once

#include "core/blob.hpp"

#include <pmr/provider.hpp>
#include <pmr/target.hpp>
#include <pmr/window.hpp>

#include <cstddef>
#include <string>
#include <sys/types.h>
#include <type_traits>
#include <utility>

namespace pmr::detail {

/// What a provider connection knows about its own side.
struct ConnectionSetup {
    const Target* target = nullptr;
    std::string where; ///< for error messages: "rank 0 -> peer 1 (send tag ...)"
};

/// What the generic handshake learned about the peer process.
struct PeerInfo {
    pid_t pid = 0;
    std::string node;
    bool same_node = false;
};

/// A window as the core sees it.
struct WindowSpec {
    std::byte* buffer = nullptr;
    std::size_t bytes = 0;
    bool owned = false;
    const std::string* where = nullptr; ///< for error messages; lives as long as the window
};

namespace check {

template <class W, class = void>
struct has_window_core : std::false_type {};
template <class W>
struct has_window_core<W, std::void_t<decltype(std::declval<const W&>().describe()),
                                      decltype(bool{std::declval<W&>().test()}),
                                      decltype(bool{std::declval<const W&>().peer_gone()})>>
    : std::true_type {};

template <class P, class = void>
struct has_post : std::false_type {};
template <class P>
struct has_post<P, std::void_t<decltype(std::declval<typename P::SendWindow&>().post(
                       std::declval<const std::byte*>(), std::size_t{}))>> : std::true_type {};

template <class P, class = void>
struct has_receive : std::false_type {};
template <class P>
struct has_receive<P, std::void_t<decltype(std::declval<typename P::RecvWindow&>().init()),
                                  decltype(std::size_t{std::declval<const typename P::RecvWindow&>()
                                                           .received_bytes()})>> : std::true_type {
};

template <class P, class W, class = void>
struct has_connect : std::false_type {};
template <class P, class W>
struct has_connect<P, W,
                   std::void_t<decltype(std::declval<W&>().connect(
                       std::declval<typename P::Connection&>(), std::declval<const Blob&>()))>>
    : std::true_type {};

// Optional members.

template <class P, class = void>
struct has_allocator : std::false_type {};
template <class P>
struct has_allocator<P, std::void_t<decltype(static_cast<void*>(P::allocate(
                                        std::size_t{}, std::declval<const std::string&>()))),
                                    decltype(P::deallocate(std::declval<void*>()))>>
    : std::true_type {};

template <class W, class = void>
struct has_range_post : std::false_type {};
template <class W>
struct has_range_post<
    W, std::void_t<decltype(std::declval<W&>().post(
           std::declval<const std::byte*>(), std::declval<const RailRange*>(), std::size_t{}))>>
    : std::true_type {};

template <class W, class = void>
struct has_discard : std::false_type {};
template <class W>
struct has_discard<W, std::void_t<decltype(std::declval<W&>().discard())>> : std::true_type {};

} // namespace check

/// Compile-time check of a provider against the interface above; one readable message per gap.
template <class P>
constexpr bool provider_conforms() {
    static_assert(std::is_same_v<std::decay_t<decltype(P::id)>, Provider>,
                  "a provider needs `static constexpr Provider id`");
    static_assert(std::is_same_v<std::decay_t<decltype(P::handshake)>, bool>,
                  "a provider needs `static constexpr bool handshake`");
    static_assert(std::is_same_v<decltype(P::hello(std::declval<const ConnectionSetup&>())), Blob>,
                  "a provider needs `static Blob hello(const ConnectionSetup&)`");
    static_assert(
        std::is_constructible_v<typename P::Connection, const ConnectionSetup&, const PeerInfo&,
                                const Blob&>,
        "Provider::Connection must be constructible from (ConnectionSetup, PeerInfo, Blob)");
    static_assert(std::is_nothrow_move_constructible_v<typename P::Connection>,
                  "Provider::Connection must be nothrow movable");
    static_assert(std::is_constructible_v<typename P::SendWindow, const WindowSpec&> &&
                      std::is_constructible_v<typename P::RecvWindow, const WindowSpec&>,
                  "Provider::SendWindow/RecvWindow must be constructible from a WindowSpec");
    static_assert(std::is_nothrow_move_constructible_v<typename P::SendWindow> &&
                      std::is_nothrow_move_constructible_v<typename P::RecvWindow>,
                  "Provider::SendWindow/RecvWindow must be nothrow movable");
    static_assert(check::has_window_core<typename P::SendWindow>::value &&
                      check::has_window_core<typename P::RecvWindow>::value,
                  "provider windows need describe() const, bool test(), bool peer_gone() const");
    static_assert(check::has_connect<P, typename P::SendWindow>::value &&
                      check::has_connect<P, typename P::RecvWindow>::value,
                  "provider windows need connect(Connection&, const Blob& peer_description)");
    static_assert(check::has_post<P>::value,
                  "Provider::SendWindow needs post(const std::byte*, std::size_t)");
    static_assert(check::has_receive<P>::value,
                  "Provider::RecvWindow needs init() and std::size_t received_bytes() const");
    return true;
}

} // namespace pmr::detail
