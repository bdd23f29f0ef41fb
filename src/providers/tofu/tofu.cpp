// SPDX-License-Identifier: MIT
#include "providers/tofu/tofu.hpp"

#include "providers/tofu/transport.hpp"

#include "base/environment.hpp"
#include "base/error.hpp"

#include <algorithm>
#include <utility>

namespace pmr::detail {

using tofu::TofuProcess;

void* Tofu::allocate(std::size_t bytes, const std::string& where) {
    return TofuProcess::instance(where)->allocate(bytes, where);
}

void Tofu::deallocate(void* pointer) noexcept {
    if (auto process = TofuProcess::existing()) {
        process->deallocate(pointer);
    }
}

Tofu::Local::Local(const ConnectionSetup& setup) : process(TofuProcess::instance(setup.where)) {}

// -------------------------------------------------------------------------------------------------
// Connection
// -------------------------------------------------------------------------------------------------

Tofu::Connection::Connection(Local&& local, const ConnectionSetup& setup, const PeerInfo& peer,
                             const Blob& hello)
    : process_(std::move(local.process)) {
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

struct Tofu::SendWindow::State {
    explicit State(const WindowSpec& spec)
        : where(spec.where), rails(TofuProcess::instance(*spec.where), spec.where) {}
    const std::string* where;
    rails::RailSender<Transport> rails;
};

Tofu::SendWindow::SendWindow(const WindowSpec& spec) : state_(std::make_unique<State>(spec)) {}
Tofu::SendWindow::SendWindow(SendWindow&& other) noexcept = default;
Tofu::SendWindow& Tofu::SendWindow::operator=(SendWindow&& other) noexcept = default;

Tofu::SendWindow::~SendWindow() {
    if (state_ && !state_->rails.close()) {
        // The emulated TNI still reads from this state: keep it.
        (void)state_.release(); // NOLINT(bugprone-unused-return-value)
    }
}

Blob Tofu::SendWindow::describe() const {
    return state_->rails.describe();
}

void Tofu::SendWindow::connect(Connection& connection, const Blob& peer, std::size_t peer_bytes) {
    BlobReader reader(peer, *state_->where);
    (void)state_->rails.connect(connection, reader, /*signal_by_message=*/false, peer_bytes);
    (void)reader.get_bytes(); // the provider's part: none
    reader.finish();
}

void Tofu::SendWindow::post(const std::byte* data, std::size_t bytes) {
    state_->rails.post(data, bytes);
}

void Tofu::SendWindow::post(const std::byte* data, const RailRange* ranges, std::size_t count) {
    state_->rails.post(data, ranges, count);
}

bool Tofu::SendWindow::test() {
    return state_->rails.progress();
}

bool Tofu::SendWindow::peer_gone() const noexcept {
    return state_->rails.receiver_closed();
}

struct Tofu::RecvWindow::State {
    explicit State(const WindowSpec& spec)
        : rails(TofuProcess::instance(*spec.where), spec.where, spec.buffer, spec.bytes, 0) {}
    rails::RailReceiver<Transport> rails;
};

Tofu::RecvWindow::RecvWindow(const WindowSpec& spec) : state_(std::make_unique<State>(spec)) {}
Tofu::RecvWindow::RecvWindow(RecvWindow&& other) noexcept = default;
Tofu::RecvWindow& Tofu::RecvWindow::operator=(RecvWindow&& other) noexcept = default;

Tofu::RecvWindow::~RecvWindow() {
    if (state_ && !state_->rails.close()) {
        // The sender may still write into this state: keep it.
        (void)state_.release(); // NOLINT(bugprone-unused-return-value)
    }
}

Blob Tofu::RecvWindow::describe() const {
    return state_->rails.describe({});
}

void Tofu::RecvWindow::connect(Connection& connection, const Blob& peer,
                               std::size_t /*peer_bytes*/) {
    state_->rails.connect(connection, peer, /*map_cell=*/false);
}

void Tofu::RecvWindow::init() {
    state_->rails.init();
}

bool Tofu::RecvWindow::test() {
    return state_->rails.test();
}

std::size_t Tofu::RecvWindow::received_bytes() const noexcept {
    return state_->rails.received_bytes();
}

bool Tofu::RecvWindow::peer_gone() const noexcept {
    return state_->rails.sender_closed();
}

std::uint64_t Tofu::SendWindow::withdrawal_key() const noexcept {
    return state_ ? state_->rails.id() : 0;
}

void Tofu::SendWindow::peer_withdrew(std::uint64_t key) noexcept {
    if (auto process = TofuProcess::existing()) {
        process->registry().peer_withdrew(key);
    }
}

std::uint64_t Tofu::RecvWindow::withdrawal_key() const noexcept {
    return state_ ? state_->rails.id() : 0;
}

void Tofu::RecvWindow::peer_withdrew(std::uint64_t key) noexcept {
    if (auto process = TofuProcess::existing()) {
        process->registry().peer_withdrew(key);
    }
}

} // namespace pmr::detail
