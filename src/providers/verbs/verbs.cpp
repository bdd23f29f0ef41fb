// SPDX-License-Identifier: MIT
#include "providers/verbs/verbs.hpp"

#include "providers/verbs/transport.hpp"
#include "rails/window_members.hpp"

#include "base/environment.hpp"
#include "base/error.hpp"

#include <algorithm>
#include <utility>

namespace pmr::detail {

using verbs::Lane;
using verbs::VerbsProcess;

namespace {

using Transport = verbs::BasicTransport<Verbs::Connection>;

/// How often peer_alive() probes the peer with an empty write.
constexpr std::chrono::seconds probe_interval{1};

} // namespace

// -------------------------------------------------------------------------------------------------
// Provider-wide
// -------------------------------------------------------------------------------------------------

bool Verbs::reaches(const PeerInfo& peer) noexcept {
    // Looked up once: opening every device costs milliseconds.
    static const bool device_present = !verbs::active_ports().empty();
    return !peer.same_node && device_present;
}

void* Verbs::allocate(std::size_t bytes, const std::string& where) {
    return VerbsProcess::instance(where)->allocate_window(bytes, where);
}

void Verbs::deallocate(void* pointer) noexcept {
    if (auto process = VerbsProcess::existing()) {
        process->deallocate_window(pointer);
    }
}

Verbs::Local::Local(const ConnectionSetup& setup) : LocalBase{VerbsProcess::instance(setup.where)} {
    for (std::size_t rail = 0; rail < process->size(); ++rail) {
        lanes.push_back(std::make_shared<Lane>(*process, rail,
                                               setup.where + ", verbs rail " +
                                                   std::to_string(rail) + " (" +
                                                   process->rail(rail).name + ")"));
    }
}

Blob Verbs::Local::hello() const {
    std::vector<verbs::LaneAddress> addresses;
    for (const auto& lane : lanes) {
        addresses.push_back(lane->address());
    }
    return verbs::encode_hello(addresses);
}

// -------------------------------------------------------------------------------------------------
// Connection
// -------------------------------------------------------------------------------------------------

Verbs::Connection::Connection(Local&& local, const ConnectionSetup& setup, const PeerInfo& /*peer*/,
                              const Blob& hello)
    : ConnectionBase(std::move(local.process)), last_probe_(std::chrono::steady_clock::now()) {
    const std::vector<verbs::LaneAddress> peer = verbs::decode_hello(hello, setup.where);
    const std::size_t count = std::min(peer.size(), local.lanes.size());
    for (std::size_t rail = 0; rail < count; ++rail) {
        const std::shared_ptr<Lane>& lane = local.lanes[rail];
        process_->add_lane(lane);
        lane->connect(peer[rail], setup.where + ", verbs rail " + std::to_string(rail) + " (" +
                                      process_->rail(rail).name + ")");
        lanes_.push_back(lane);
    }
    debug_log("verbs: " + std::to_string(count) + " rail(s) (this side " +
              std::to_string(local.lanes.size()) + ", peer " + std::to_string(peer.size()) +
              "), queue pair " + std::to_string(lanes_.front()->qp_number()) + " -> " +
              std::to_string(peer.front().qpn) + " [" + setup.where + "]");
}

RailInfo Verbs::Connection::rail(std::size_t index) const {
    return {process_->rail(lanes_[index]->rail()).name, 0.0};
}

bool Verbs::Connection::peer_alive() {
    progress();
    const auto now = std::chrono::steady_clock::now();
    if (now - last_probe_ >= probe_interval) {
        last_probe_ = now;
        lanes_.front()->probe();
    }
    return std::none_of(lanes_.begin(), lanes_.end(),
                        [](const std::shared_ptr<Lane>& lane) { return lane->failed(); });
}

void Verbs::Connection::check(const std::string& where) const {
    for (const auto& lane : lanes_) {
        if (lane->failed()) {
            lane->raise_failure(where);
        }
    }
}

void Verbs::Connection::progress() const noexcept {
    for (const auto& lane : lanes_) {
        lane->progress();
        lane->flush();
    }
}

// -------------------------------------------------------------------------------------------------
// Windows
// -------------------------------------------------------------------------------------------------

namespace {

/// What the verbs windows add to the put path's: a test that finds no progress throws if a work
/// request of the connection failed (PeerLost or ProviderError, with the status and the port).
template <class Rails>
struct Checked : Rails {
    using Rails::Rails;

    void connect(Verbs::Connection& to, const Blob& peer, std::size_t peer_bytes) {
        (void)Rails::connect(to, peer, peer_bytes);
        connection = &to;
    }
    bool test() {
        if (Rails::test()) {
            return true;
        }
        connection->check(this->at());
        return false;
    }

    Verbs::Connection* connection = nullptr;
};

} // namespace

/// Rounds are signalled by a notice on the rail's queue pair (Transport::signal).
template <>
struct rails::Window<Verbs, rails::send>::State : Checked<rails::SendState<Transport, true>> {
    explicit State(const WindowSpec& spec) : Checked(spec) {
        // The payload's source: registered once, on every rail.
        if (spec.bytes > 0) {
            VerbsProcess& process = *VerbsProcess::instance(*spec.where);
            for (std::size_t rail = 0; rail < process.size(); ++rail) {
                registrations.push_back(process.map(rail, spec.buffer, spec.bytes, *spec.where));
            }
        }
    }

    std::vector<std::shared_ptr<verbs::Memory>> registrations;
};

template <>
struct rails::Window<Verbs, rails::receive>::State : Checked<rails::RecvState<Transport>> {
    using Checked::Checked;
};

PMR_RAILS_WINDOWS(Verbs);

} // namespace pmr::detail
