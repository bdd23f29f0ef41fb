// SPDX-License-Identifier: MIT
// The providers compiled into this build, the variants that hold them, and the selection function.
// This is the only place that knows which providers exist.
#pragma once

#include "providers/interface.hpp"
#include "providers/null/null.hpp"
#include "providers/self/self.hpp"

#include <pmr/config.hpp>

#if PMR_WITH_SHM
#include "providers/shm/shm.hpp"
#endif
#if PMR_WITH_UCX
#include "providers/ucx/ucx.hpp"
#endif

#include <optional>
#include <variant>
#include <vector>

namespace pmr::detail {

template <class... P>
struct ProviderSet {
    static_assert((provider_conforms<P>() && ...));
    using Connection = std::variant<std::monostate, typename P::Connection...>;
    using SendWindow = std::variant<std::monostate, typename P::SendWindow...>;
    using RecvWindow = std::variant<std::monostate, typename P::RecvWindow...>;

    /// Id of the provider that defines W as its Connection, SendWindow or RecvWindow; -1 if none.
    template <class W>
    static constexpr int id_of() {
        int id = -1;
        (void)((std::is_same_v<W, typename P::Connection> ||
                        std::is_same_v<W, typename P::SendWindow> ||
                        std::is_same_v<W, typename P::RecvWindow>
                    ? (id = static_cast<int>(P::id), true)
                    : false) ||
               ...);
        return id;
    }

    /// Calls `f(P{})` for the provider whose id is `id`; false if it is not compiled in.
    template <class F>
    static bool dispatch(Provider id, F&& f) {
        return ((P::id == id ? (f(P{}), true) : false) || ...);
    }
};

using Compiled = ProviderSet<Null, Self
#if PMR_WITH_SHM
                             ,
                             Shm
#endif
#if PMR_WITH_UCX
                             ,
                             Ucx
#endif
                             >;

/// What one side of a connection brings to the choice of provider.
struct Offer {
    std::vector<Provider> candidates; ///< providers this side can use for the target
    std::optional<Provider> forced;   ///< forced by argument or PMR_PROVIDER
};

/// The provider both sides will use, computed identically on both from the two offers. Throws
/// ArgumentError if the sides force different providers, ProviderError if nothing fits.
Provider select_provider(const Offer& mine, const Offer& theirs, bool same_node,
                         const std::string& where);

} // namespace pmr::detail
