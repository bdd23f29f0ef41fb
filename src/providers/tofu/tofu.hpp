// SPDX-License-Identifier: MIT
// The tofu provider: pmr over an emulated Tofu interconnect (the K computer's and Fugaku's), as
// its low-level interface presents it, so that multi-NIC code paths can be developed, tested and
// measured on any Linux machine. The emulation (emulated/) makes each process one node with
// several TNIs over shared memory, and a timing model makes what a receiver observes follow Tofu's
// published latency and bandwidth.
//
// Connections have one rail per TNI (PMR_TOFU_TNIS, or the model's: 6 for fugaku, 4 for k and
// off; fewer with PMR_TOFU_RAILS / PMR_RAILS), starting at a TNI that rotates from connection to
// connection, so that plain posts (rail 0) to a rank's neighbours spread over its TNIs. The data
// path is the shared rail protocol (rails/put_path.hpp) over the TNIs' command queues
// (transport.hpp): round n is credit put, payload puts (pieces over their rails), then on each rail
// that carried pieces its completion word, and on rail 0 the slot header and sequence word. Every
// put of a round lands at its modelled time; the receiver polls its inbox. Notices between windows
// (set-up, teardown) are zero-byte puts whose remote notice carries them.
//
// Chosen only when asked for (preference 0): PMR_PROVIDER=tofu or
// pmr::Connection(target, pmr::Provider::tofu). Peers must run on this machine.
#pragma once

#include "base/peer_process.hpp"
#include "providers/interface.hpp"
#include "providers/tofu/process.hpp"
#include "rails/process_base.hpp"
#include "rails/windows.hpp"

#include <memory>
#include <string>

namespace pmr::detail {

struct Tofu : rails::RailsProvider {
    static constexpr Provider id = Provider::tofu;
    static constexpr int preference = 0;
    /// The emulated interconnect spans the processes of one machine.
    static bool reaches(const PeerInfo& peer) noexcept { return peer.same_node; }
    /// For the neighbour exchange: the emulated Tofu (8 ranks on a 2 x 2 x 2 torus, 4 TNIs, model
    /// k) has split slower than direct up to 64 KiB and faster from 256 KiB: a split message costs
    /// 10 puts against 4 to 5 whole, and every put of the emulation costs CPU that the 2 cores of
    /// the measuring machine lack, while the model's K injection bandwidth caps what split can
    /// win at 5%. Real TNIs, whose puts cost no CPU, split from 4 KiB profitably (the seed, and
    /// the default of pmr::ProviderTraits), which is what the calibration finds there.
    static constexpr std::size_t split_crossover_bytes = std::size_t{256} << 10;
    static constexpr std::size_t min_fragment_bytes = std::size_t{1} << 10;

    /// Memory for library-owned windows: a memory file registered with the node, which peers map.
    static void* allocate(std::size_t bytes, const std::string& where);
    static void deallocate(void* pointer) noexcept;

    struct Local : rails::LocalBase<tofu::TofuProcess> {
        explicit Local(const ConnectionSetup& setup);
        Blob hello() const { return process->hello(); }
    };

    class Connection : public rails::ConnectionBase<tofu::TofuProcess> {
    public:
        /// @throws ProviderError if the peer is not on this machine or its node cannot be mapped.
        Connection(Local&& local, const ConnectionSetup& setup, const PeerInfo& peer,
                   const Blob& hello);

        std::size_t rails() const noexcept { return rails_; }
        RailInfo rail(std::size_t index) const;
        bool peer_alive();

        /// The TNI of this node that rail `rail` uses, and the peer's TNI its notices go to.
        std::size_t tni(std::size_t rail) const noexcept {
            const auto& devices = process_->settings().devices;
            return devices.empty() ? (first_tni_ + rail) % process_->tnis() : devices[rail];
        }
        std::size_t remote_tni(std::size_t rail) const noexcept {
            return tni(rail) % peer_.node->tnis();
        }
        const tofu::Peer& peer() const noexcept { return peer_; }
        void progress() const noexcept { process_->progress(); }

    private:
        tofu::Peer peer_;
        std::size_t rails_ = 1;
        std::size_t first_tni_ = 0;
        PeerProcess peer_process_;
    };

    using SendWindow = rails::SendWindow<Tofu>;
    using RecvWindow = rails::RecvWindow<Tofu>;
};

} // namespace pmr::detail
