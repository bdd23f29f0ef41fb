// SPDX-License-Identifier: MIT
#include "providers/tofu/tofu.hpp"

#include "providers/tofu/transport.hpp"
#include "rails/window_members.hpp"

#include "base/environment.hpp"
#include "base/error.hpp"

#include <algorithm>
#include <utility>

namespace pmr::detail {

using tofu::TofuProcess;

void* Tofu::allocate(std::size_t bytes, const std::string& where) {
    return TofuProcess::instance(where)->allocate_window(bytes, where);
}

void Tofu::deallocate(void* pointer) noexcept {
    if (auto process = TofuProcess::existing()) {
        process->deallocate_window(pointer);
    }
}

Tofu::Local::Local(const ConnectionSetup& setup) : LocalBase{TofuProcess::instance(setup.where)} {}

// -------------------------------------------------------------------------------------------------
// Connection
// -------------------------------------------------------------------------------------------------

Tofu::Connection::Connection(Local&& local, const ConnectionSetup& setup, const PeerInfo& peer,
                             const Blob& hello)
    : ConnectionBase(std::move(local.process)) {
    if (!peer.same_node) {
        raise<ProviderError>("the emulated Tofu interconnect reaches processes of this machine "
                             "only, not " +
                                 peer.node,
                             setup.where, "Unset PMR_PROVIDER=tofu for runs on several nodes.");
    }
    peer_ = process_->peer(hello, setup.where);
    rails_ = std::min(process_->settings().rails, peer_.node->tnis());
    first_tni_ = process_->next_first_tni();
    peer_process_ = PeerProcess(peer.pid);
    debug_log("tofu: " + std::to_string(rails_) + " rail(s) from TNI " +
              std::to_string(first_tni_) + " to node " +
              std::to_string(peer_.node->address().node) + ", " + std::to_string(peer_.node->hops) +
              " hop(s) away [" + setup.where + "]");
}

RailInfo Tofu::Connection::rail(std::size_t index) const {
    return {"tni" + std::to_string(tni(index)),
            process_->settings().model.enabled
                ? process_->node().model().parameters().link_bandwidth
                : 0.0};
}

bool Tofu::Connection::peer_alive() {
    process_->progress();
    return peer_process_.alive();
}

// -------------------------------------------------------------------------------------------------
// Windows
// -------------------------------------------------------------------------------------------------

namespace {
using Transport = tofu::BasicTransport<Tofu::Connection>;
} // namespace

/// Rounds are signalled by puts: 32 B of piggyback hold the notice and no data (transport.hpp).
template <>
struct rails::Window<Tofu, rails::send>::State : rails::SendState<Transport, false> {
    using SendState::SendState;
};

template <>
struct rails::Window<Tofu, rails::receive>::State : rails::RecvState<Transport> {
    using RecvState::RecvState;
};

PMR_RAILS_WINDOWS(Tofu);

} // namespace pmr::detail
