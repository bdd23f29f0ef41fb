// SPDX-License-Identifier: MIT
// The static interface every provider implements, the check that it does, and ProviderSet, the
// variants the core holds providers in.
//
// A provider P describes itself:
//   static constexpr Provider id;
//   static constexpr int preference;          // > 0: chosen by default for peers it reaches, the
//                                             // highest first; 0: only when forced
//   static bool reaches(const PeerInfo&);     // can it connect to that peer? Starts nothing.
//   static constexpr bool handshake;          // false: no set-up messages at all (null)
//   static constexpr bool has_rails;          // whether a connection may have several rails
// and may say, for code that adapts to it (pmr::traits(), the defaults there otherwise):
//   static constexpr std::size_t split_crossover_bytes; // messages from this size on gain from
//                                             // being split over the rails
//   static constexpr std::size_t min_fragment_bytes;    // the smallest fragment worth a rail
// and brings, per connection, a local object made before the handshake and the connection made
// from it when the peer's hello arrives:
//   class Local {                             // created when the provider is decided
//       explicit Local(const ConnectionSetup&);
//       Blob hello() const;                   // for the peer: addresses, queue ids, ...
//   };
//   class Connection {
//       Connection(Local&&, const ConnectionSetup&, const PeerInfo&, const Blob& peer_hello);
//       std::size_t rails() const;            // >= 1
//       RailInfo rail(std::size_t) const;
//       bool peer_alive();                    // cheap enough to call every few milliseconds
//   };
// and, per window, one object of one side (nothrow-movable):
//   class SendWindow / RecvWindow {
//       explicit SendWindow(const WindowSpec&); // local resources, at window construction
//       Blob describe() const;                // what the peer needs, sent at construction
//       void connect(Connection&, const Blob& peer_description,    // at first use; the
//                    std::size_t peer_bytes);  // peer window's size as the core learnt it
//       bool test();                          // non-blocking progress; true when complete,
//                                             // and again on every call until the next round
//       bool peer_gone() const;               // peer destroyed its window (checked when slow)
//   };
//   SendWindow::post(const std::byte* data, std::size_t bytes);   // starts a transfer
//   RecvWindow::init();                       // grants the sender the buffer
//   RecvWindow::received_bytes() const;
// and may have (detected with the traits below; the core falls back when they are missing)
//   static void* allocate(std::size_t, const std::string& where);  // memory for library-owned
//   static void deallocate(void*) noexcept;   // windows of connections that use this provider
//   SendWindow::post(const std::byte*, const RailRange*, std::size_t); // multi-rail; else post(n)
//   SendWindow::post(const std::byte*, const RailSlice*, std::size_t count,
//                    std::size_t element_size);  // the same in elements, with post(ranges)
// The core (src/core/) owns the state machine, waiting, deadlines and error context; providers
// only move bytes. A provider's folder describes it to the build (cmake/pmrProviders.cmake), and
// every list of providers is derived from there.
#pragma once

#include "base/blob.hpp"

#include <pmr/provider.hpp>
#include <pmr/target.hpp>
#include <pmr/window.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/types.h>
#include <type_traits>
#include <utility>
#include <variant>

namespace pmr::detail {

/// What a provider connection knows about its own side.
struct ConnectionSetup {
    const Target* target = nullptr;
    std::string where; ///< for error messages: "rank 0 -> peer 1 (send tag ...)"
};

/// What pmr knows about the peer process, from the communicator's node map or the handshake.
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

/// Ready-made parts for providers whose connections carry no state of their own (null, self):
/// nothing to say in the handshake (`P` keeps the types of two providers apart in the core's
/// variants) ...
template <Provider P>
struct SilentLocal {
    explicit SilentLocal(const ConnectionSetup& /*setup*/) noexcept {}
    Blob hello() const { return {}; }
};

/// ... a connection of one rail whose peer is never lost (it is this process, or none) ...
template <Provider P>
class StatelessConnection {
public:
    StatelessConnection(SilentLocal<P>&& /*local*/, const ConnectionSetup& /*setup*/,
                        const PeerInfo& /*peer*/, const Blob& /*hello*/) noexcept {}
    std::size_t rails() const noexcept { return 1; }
    RailInfo rail(std::size_t /*index*/) const { return {}; }
    bool peer_alive() const noexcept { return true; }
};

/// ... and chosen by the target alone, never for a peer's location (preference 0).
template <Provider P>
struct StatelessProvider {
    static constexpr Provider id = P;
    static constexpr int preference = 0;
    static bool reaches(const PeerInfo& /*peer*/) noexcept { return false; }
    static constexpr bool has_rails = false;
    using Local = SilentLocal<P>;
    using Connection = StatelessConnection<P>;
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
struct has_connect<
    P, W,
    std::void_t<decltype(std::declval<W&>().connect(std::declval<typename P::Connection&>(),
                                                    std::declval<const Blob&>(), std::size_t{}))>>
    : std::true_type {};

template <class P, class = void>
struct has_self_description : std::false_type {};
template <class P>
struct has_self_description<
    P, std::void_t<decltype(int{P::preference}), decltype(bool{P::has_rails}),
                   decltype(bool{P::reaches(std::declval<const PeerInfo&>())})>> : std::true_type {
};

template <class P, class = void>
struct has_split_hints : std::false_type {};
template <class P>
struct has_split_hints<P, std::void_t<decltype(std::size_t{P::split_crossover_bytes}),
                                      decltype(std::size_t{P::min_fragment_bytes})>>
    : std::true_type {};

template <class P, class = void>
struct has_local : std::false_type {};
template <class P>
struct has_local<P, std::void_t<decltype(Blob{std::declval<const typename P::Local&>().hello()})>>
    : std::bool_constant<std::is_constructible_v<typename P::Local, const ConnectionSetup&> &&
                         std::is_nothrow_move_constructible_v<typename P::Local>> {};

template <class P, class = void>
struct has_connection_core : std::false_type {};
template <class P>
struct has_connection_core<
    P, std::void_t<decltype(std::size_t{std::declval<const typename P::Connection&>().rails()}),
                   decltype(
                       RailInfo{std::declval<const typename P::Connection&>().rail(std::size_t{})}),
                   decltype(bool{std::declval<typename P::Connection&>().peer_alive()})>>
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
struct has_slice_post : std::false_type {};
template <class W>
struct has_slice_post<W, std::void_t<decltype(std::declval<W&>().post(
                             std::declval<const std::byte*>(), std::declval<const RailSlice*>(),
                             std::size_t{}, std::size_t{}))>> : std::true_type {};

} // namespace check

/// Compile-time check of a provider against the interface above; one readable message per gap.
template <class P>
constexpr bool provider_conforms() {
    static_assert(std::is_same_v<std::decay_t<decltype(P::id)>, Provider>,
                  "a provider needs `static constexpr Provider id`");
    static_assert(check::has_self_description<P>::value,
                  "a provider describes itself: `static constexpr int preference`, `static "
                  "constexpr bool has_rails` and `static bool reaches(const PeerInfo&)`");
    static_assert(std::is_same_v<std::decay_t<decltype(P::handshake)>, bool>,
                  "a provider needs `static constexpr bool handshake`");
    static_assert(check::has_local<P>::value,
                  "a provider needs a nothrow-movable `Local` constructible from a "
                  "ConnectionSetup, with `Blob hello() const`");
    static_assert(std::is_constructible_v<typename P::Connection, typename P::Local&&,
                                          const ConnectionSetup&, const PeerInfo&, const Blob&>,
                  "Provider::Connection must be constructible from (Local&&, ConnectionSetup, "
                  "PeerInfo, Blob)");
    static_assert(check::has_connection_core<P>::value,
                  "Provider::Connection needs `std::size_t rails() const`, `RailInfo "
                  "rail(std::size_t) const` and `bool peer_alive()`");
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
                  "provider windows need connect(Connection&, const Blob& peer_description, "
                  "std::size_t peer_bytes)");
    static_assert(check::has_post<P>::value,
                  "Provider::SendWindow needs post(const std::byte*, std::size_t)");
    static_assert(check::has_receive<P>::value,
                  "Provider::RecvWindow needs init() and std::size_t received_bytes() const");
    static_assert(!check::has_range_post<typename P::SendWindow>::value || P::has_rails,
                  "a provider with multi-rail post(ranges) must say `has_rails = true`");
    static_assert(check::has_range_post<typename P::SendWindow>::value ==
                      check::has_slice_post<typename P::SendWindow>::value,
                  "Provider::SendWindow with post(ranges) needs post(slices, count, element_size) "
                  "too, and the other way round");
    return true;
}

/// The compiled providers as types: the variants the core holds them in and the loops over them.
template <class... P>
struct ProviderSet {
    static_assert((provider_conforms<P>() && ...));
    using Local = std::variant<std::monostate, typename P::Local...>;
    using Connection = std::variant<std::monostate, typename P::Connection...>;
    using SendWindow = std::variant<std::monostate, typename P::SendWindow...>;
    using RecvWindow = std::variant<std::monostate, typename P::RecvWindow...>;

    static constexpr std::size_t size = sizeof...(P);

    /// Calls `f(P{})` for the provider whose id is `id`; false if it is not compiled in.
    template <class F>
    static bool dispatch(Provider id, F&& f) {
        return ((P::id == id ? (f(P{}), true) : false) || ...);
    }

    /// Calls `f(P{})` for every compiled provider, in list order.
    template <class F>
    static void for_each(F&& f) {
        (f(P{}), ...);
    }
};

} // namespace pmr::detail
