// SPDX-License-Identifier: MIT
#include "providers/verbs/verbs.hpp"

#include "providers/verbs/transport.hpp"

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

Verbs::Local::Local(const ConnectionSetup& setup) : process(VerbsProcess::instance(setup.where)) {
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
    : process_(std::move(local.process)), last_probe_(std::chrono::steady_clock::now()) {
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
// Send window
// -------------------------------------------------------------------------------------------------

struct Verbs::SendWindow::State {
    explicit State(const WindowSpec& spec)
        : where(spec.where), rails(VerbsProcess::instance(*spec.where), spec.where) {
        // The payload's source: registered once, on every rail.
        if (spec.bytes > 0) {
            VerbsProcess& process = *VerbsProcess::instance(*spec.where);
            for (std::size_t rail = 0; rail < process.size(); ++rail) {
                registrations.push_back(process.map(rail, spec.buffer, spec.bytes, *spec.where));
            }
        }
    }

    const std::string* where;
    Connection* connection = nullptr;
    rails::RailSender<Transport> rails;
    std::vector<std::shared_ptr<verbs::Memory>> registrations;
};

Verbs::SendWindow::SendWindow(const WindowSpec& spec) : state_(std::make_unique<State>(spec)) {}

Verbs::SendWindow::SendWindow(SendWindow&& other) noexcept = default;
Verbs::SendWindow& Verbs::SendWindow::operator=(SendWindow&& other) noexcept = default;

Verbs::SendWindow::~SendWindow() {
    if (state_ && !state_->rails.close()) {
        // The device may still read from this state and the registered buffer: keep both.
        (void)state_.release(); // NOLINT(bugprone-unused-return-value)
    }
}

Blob Verbs::SendWindow::describe() const {
    return state_->rails.describe();
}

void Verbs::SendWindow::connect(Connection& connection, const Blob& peer, std::size_t peer_bytes) {
    State& s = *state_;
    BlobReader reader(peer, *s.where);
    (void)s.rails.connect(connection, reader, true, peer_bytes);
    s.connection = &connection;
    const Blob provider_part = reader.get_bytes();
    reader.finish();
    if (!provider_part.empty()) {
        reader.malformed("the receive window's verbs part has " +
                         std::to_string(provider_part.size()) + " B, expected none");
    }
}

void Verbs::SendWindow::post(const std::byte* data, std::size_t bytes) {
    state_->rails.post(data, bytes);
}

void Verbs::SendWindow::post(const std::byte* data, const RailRange* ranges, std::size_t count) {
    state_->rails.post(data, ranges, count);
}

bool Verbs::SendWindow::test() {
    State& s = *state_;
    if (s.rails.progress()) {
        return true;
    }
    s.connection->check(*s.where); // a failed write ends the round with its reason
    return false;
}

bool Verbs::SendWindow::peer_gone() const noexcept {
    return state_->rails.receiver_closed();
}

// -------------------------------------------------------------------------------------------------
// Receive window
// -------------------------------------------------------------------------------------------------

struct Verbs::RecvWindow::State {
    explicit State(const WindowSpec& spec)
        : where(spec.where),
          rails(VerbsProcess::instance(*spec.where), spec.where, spec.buffer, spec.bytes, 0) {}

    const std::string* where;
    Connection* connection = nullptr;
    rails::RailReceiver<Transport> rails;
};

Verbs::RecvWindow::RecvWindow(const WindowSpec& spec) : state_(std::make_unique<State>(spec)) {}

Verbs::RecvWindow::RecvWindow(RecvWindow&& other) noexcept = default;
Verbs::RecvWindow& Verbs::RecvWindow::operator=(RecvWindow&& other) noexcept = default;

Verbs::RecvWindow::~RecvWindow() {
    if (state_ && !state_->rails.close()) {
        // The sender may still write into this state's memory: keep it.
        (void)state_.release(); // NOLINT(bugprone-unused-return-value)
    }
}

Blob Verbs::RecvWindow::describe() const {
    return state_->rails.describe(Blob{});
}

void Verbs::RecvWindow::connect(Connection& connection, const Blob& peer,
                                std::size_t /*peer_bytes*/) {
    state_->rails.connect(connection, peer, false);
    state_->connection = &connection;
}

void Verbs::RecvWindow::init() {
    state_->rails.init();
}

bool Verbs::RecvWindow::test() {
    State& s = *state_;
    if (s.rails.test()) {
        return true;
    }
    s.connection->check(*s.where);
    return false;
}

std::size_t Verbs::RecvWindow::received_bytes() const noexcept {
    return state_->rails.received_bytes();
}

bool Verbs::RecvWindow::peer_gone() const noexcept {
    return state_->rails.sender_closed();
}

std::uint64_t Verbs::SendWindow::withdrawal_key() const noexcept {
    return state_ ? state_->rails.id() : 0;
}

void Verbs::SendWindow::peer_withdrew(std::uint64_t key) noexcept {
    if (auto process = VerbsProcess::existing()) {
        process->registry().peer_withdrew(key);
    }
}

std::uint64_t Verbs::RecvWindow::withdrawal_key() const noexcept {
    return state_ ? state_->rails.id() : 0;
}

void Verbs::RecvWindow::peer_withdrew(std::uint64_t key) noexcept {
    if (auto process = VerbsProcess::existing()) {
        process->registry().peer_withdrew(key);
    }
}

} // namespace pmr::detail
