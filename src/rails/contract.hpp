// SPDX-License-Identifier: MIT
// The contract of the put path (put_path.hpp): the static interface a rail transport implements
// for its network, the traits that check it, and the window descriptions both sides exchange.
//
// A transport T supplies (checked by transport_conforms<T>()):
//   using Connection;  // the provider's connection: rails(), progress(), peer_alive()
//   using Process;     // the provider's process state: rails::Registry& registry();
//                      //   CreditCell acquire_cell(where); Blob cell_key(const CreditCell&);
//                      //   void bury(std::shared_ptr<Memory>) (kept until exit)
//   using Memory;      // registered memory: std::byte* data() const
//   using RemoteKey;   // a peer's memory key unpacked on one rail; std::byte* pointer(address)
//                      //   is where that memory is mapped here, or null
//   using Request;     // a pending local operation: pending(), done(call, where) (throws)
//   static std::size_t rails(const Process&);
//   static Request put(Connection&, rail, const RemoteKey&, const void* source, bytes, address,
//                      where);                   // the source stays valid until done
//   static void fence(Connection&, rail, where); // later operations on the rail land after
//                                                // earlier ones
//   static Request signal(Connection&, rail, const Notice&, const void* data, bytes, where);
//                                                // a notice with up to inline_capacity bytes,
//                                                // handled by the peer's registry, after the
//                                                // rail's earlier puts; sources valid until done
//   static void notify(Connection&, rail, const Notice&, bool reply, where); // fire and forget
//   static RemoteKey unpack(Connection&, rail, const Blob& key, const char* what, where);
//   static std::shared_ptr<Memory> allocate(Process&, bytes, zeroed, where);  // rail 0 memory
//   static std::shared_ptr<Memory> map(Process&, rail, void* address, bytes, where);
//   static std::shared_ptr<Memory> owned(Process&, const void* address, bytes); // or null
//   static Blob pack(const Memory&, where);
//   static void put_key(BlobWriter&, const Blob&);  static Blob get_key(BlobReader&, what, where);
// and, for the message path (protocol.hpp; optional, see has_piece_messages):
//   static Request send(Connection&, rail, const Piece&, const void* data, bytes, where);
//                                                // one message with the piece's data, handed to
//                                                // the peer's Registry::destination()/landed();
//                                                // complete once the data left the source and
//                                                // the piece header may be reused
// and, optionally, for the message path (see has_credit_carrier):
//   Connection::credits() -> CreditCarrier&  // this side's carrier of credits (protocol.hpp)
// and, optionally (see has_put_pair):
//   static std::pair<Request, Request> put_pair(Connection&, rail, const RemoteKey&,
//                      const void* first, bytes, address, const void* second, bytes, address,
//                      where);                   // two puts, the second landing after the
//                                                // first, issued at once (a slot and its
//                                                // sequence word: the transport saves the
//                                                // per-put work between them)
#pragma once
#pragma once

#include "base/backoff.hpp"
#include "base/blob.hpp"
#include "base/environment.hpp"
#include "base/error.hpp"
#include "rails/protocol.hpp"
#include "rails/registry.hpp"

#include <pmr/window.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace pmr::detail::rails {

/// How long a destructor waits for the network or the peer before it gives up: destructors must
/// not hang on a dead or stuck peer, and cannot throw. PMR_TIMEOUT if set and shorter, else 10 s.
inline double teardown_grace_seconds() noexcept {
    try {
        const double timeout = settings().timeout_seconds;
        return timeout > 0 && timeout < 10.0 ? timeout : 10.0;
    } catch (...) { // malformed PMR_TIMEOUT: reported elsewhere
        return 10.0;
    }
}

/// The types a transport names (see the contract above), for a transport to derive from. The
/// process state is the connection's (ConnectionBase, process_base.hpp).
template <class ConnectionT, class MemoryT, class RemoteKeyT, class RequestT>
struct TransportTypes {
    using Connection = ConnectionT;
    using Process = typename ConnectionT::Process;
    using Memory = MemoryT;
    using RemoteKey = RemoteKeyT;
    using Request = RequestT;
};

namespace check {
template <class T, class = void>
struct is_transport : std::false_type {};
template <class T>
struct is_transport<
    T, std::void_t<
           typename T::Connection, typename T::Process, typename T::Memory, typename T::RemoteKey,
           typename T::Request,
           decltype(std::size_t{T::rails(std::declval<const typename T::Process&>())}),
           decltype(typename T::Request{
               T::put(std::declval<typename T::Connection&>(), std::size_t{},
                      std::declval<const typename T::RemoteKey&>(), std::declval<const void*>(),
                      std::size_t{}, std::uint64_t{}, std::declval<const std::string&>())}),
           decltype(T::fence(std::declval<typename T::Connection&>(), std::size_t{},
                             std::declval<const std::string&>())),
           decltype(typename T::Request{T::signal(std::declval<typename T::Connection&>(),
                                                  std::size_t{}, std::declval<const Notice&>(),
                                                  std::declval<const void*>(), std::size_t{},
                                                  std::declval<const std::string&>())}),
           decltype(T::notify(std::declval<typename T::Connection&>(), std::size_t{},
                              std::declval<const Notice&>(), bool{},
                              std::declval<const std::string&>())),
           decltype(typename T::RemoteKey{T::unpack(
               std::declval<typename T::Connection&>(), std::size_t{}, std::declval<const Blob&>(),
               std::declval<const char*>(), std::declval<const std::string&>())}),
           decltype(static_cast<Registry&>(std::declval<typename T::Process&>().registry())),
           decltype(Blob{T::pack(std::declval<const typename T::Memory&>(),
                                 std::declval<const std::string&>())}),
           decltype(bool{std::declval<typename T::Request&>().done(
               std::declval<const char*>(), std::declval<const std::string&>())})>>
    : std::true_type {};
} // namespace check

/// Whether transport T can send pieces as messages (the message path of protocol.hpp).
template <class T, class = void>
struct has_piece_messages : std::false_type {};
template <class T>
struct has_piece_messages<
    T, std::void_t<decltype(typename T::Request{T::send(
           std::declval<typename T::Connection&>(), std::size_t{}, std::declval<const Piece&>(),
           std::declval<const void*>(), std::size_t{}, std::declval<const std::string&>())})>>
    : std::true_type {};

/// Whether the connections of transport T carry credits on data (protocol.hpp, CreditCarrier).
template <class T, class = void>
struct has_credit_carrier : std::false_type {};
template <class T>
struct has_credit_carrier<T, std::void_t<decltype(static_cast<CreditCarrier&>(
                                 std::declval<typename T::Connection&>().credits()))>>
    : std::true_type {};

/// Whether transport T issues a slot and its sequence word together (T::put_pair).
template <class T, class = void>
struct has_put_pair : std::false_type {};
template <class T>
struct has_put_pair<T,
                    std::void_t<decltype(T::put_pair(
                        std::declval<typename T::Connection&>(), std::size_t{},
                        std::declval<const typename T::RemoteKey&>(), std::declval<const void*>(),
                        std::size_t{}, std::uint64_t{}, std::declval<const void*>(), std::size_t{},
                        std::uint64_t{}, std::declval<const std::string&>()))>> : std::true_type {};

template <class T>
constexpr bool transport_conforms() {
    static_assert(check::is_transport<T>::value,
                  "a rail transport needs the types and functions listed in rails/contract.hpp");
    return true;
}

/// A receive window as its sender reads it: the generic part, then the packed keys of the inbox
/// and of the buffer on every rail, then the provider's own part.
struct RecvDescription {
    std::uint64_t id;
    std::uint64_t inbox;
    std::uint64_t extra; ///< the provider's area behind the inbox (e.g. staging), 0 if none
    std::uint64_t buffer;
    std::uint64_t bytes;
};

/// A send window as its receiver reads it: the packed key of the credit cell, then this.
struct SendDescription {
    std::uint64_t id;
    std::uint64_t cell;
};

} // namespace pmr::detail::rails
