// SPDX-License-Identifier: MIT
// The verbs provider: RDMA writes over ibverbs RC queue pairs, one rail per device port.
//
// Set-up. Each process opens one device context, protection domain and completion queue per rail
// (lane.hpp) when the first connection uses verbs. A connection has one RC queue pair per rail
// (a lane); the provider hello carries each lane's address (LID, GID, QP number, PSN, MTU) and its
// notice ring, and the connection brings the queue pairs to RTR and RTS from the peer's hello.
// A receive window registers its buffer and inbox on every rail, a send window its buffer and a
// credit cell; the keys travel in describe(), connect() reads the peer's.
//
// Data path of round n: the shared rail protocol of rails/put_path.hpp (transport below), always
// signalling by notices, because separate RDMA writes are not promised to become visible in
// order to a CPU polling memory. init() writes credit n into the sender's cell (an 8 B inline RDMA
// write); post() writes the payload pieces over their rails' queue pairs into the receive buffer,
// then an `arrived` notice on each rail: an RDMA write with immediate into the receiver's notice
// ring, which the receiver sees only after the payload writes before it on that queue pair. A
// message of up to 232 B travels inside its notice: one inline write with immediate per round.
//
// Errors: a failed completion marks its lane; waits then throw PeerLost (retries exhausted, remote
// abort, flush) or ProviderError (access and protection errors), naming the status and the port.
// peer_alive() sends an empty write now and then, which fails when the peer is gone.
#pragma once

#include "providers/interface.hpp"
#include "providers/verbs/lane.hpp"
#include "rails/process_base.hpp"
#include "rails/windows.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace pmr::detail {

struct Verbs : rails::RailsProvider {
    static constexpr Provider id = Provider::verbs;
    /// After ucx: where both are compiled in, UCX (which uses the same devices) stays the default
    /// until the verbs provider has been measured on hardware.
    static constexpr int preference = 5;
    /// Peers on other nodes, when this host has an active RDMA port.
    static bool reaches(const PeerInfo& peer) noexcept;

    /// Memory for library-owned windows of verbs connections, registered at allocation.
    static void* allocate(std::size_t bytes, const std::string& where);
    static void deallocate(void* pointer) noexcept;

    struct Local : rails::LocalBase<verbs::VerbsProcess> {
        /// @throws ProviderError if this host has no usable RDMA port.
        explicit Local(const ConnectionSetup& setup);
        Blob hello() const;

        std::vector<std::shared_ptr<verbs::Lane>> lanes;
    };

    class Connection : public rails::ConnectionBase<verbs::VerbsProcess> {
    public:
        /// @throws ProviderError for a malformed hello or a queue pair that cannot be connected.
        Connection(Local&& local, const ConnectionSetup& setup, const PeerInfo& peer,
                   const Blob& hello);

        std::size_t rails() const noexcept { return lanes_.size(); }
        RailInfo rail(std::size_t index) const;
        bool peer_alive();

        verbs::Lane& lane(std::size_t rail) const noexcept { return *lanes_[rail]; }
        /// Polls the completion queues of every rail and sends what waits for credits.
        void progress() const noexcept;
        /// Throws PeerLost or ProviderError, naming the status and the port, if a work request of
        /// this connection failed.
        void check(const std::string& where) const;

    private:
        std::vector<std::shared_ptr<verbs::Lane>> lanes_;
        std::chrono::steady_clock::time_point last_probe_;
    };

    using SendWindow = rails::SendWindow<Verbs>;
    using RecvWindow = rails::RecvWindow<Verbs>;
};

} // namespace pmr::detail
