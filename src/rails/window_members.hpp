// SPDX-License-Identifier: MIT
// The members of the rails windows (rails/windows.hpp), for the .cpp of a rails provider, which
// defines their State and instantiates them; and the states most of a provider's windows are: a
// rails::RailSender or rails::RailReceiver (rails/put_path.hpp) over the provider's transport. A
// provider's State derives from one of them and hides what it does otherwise (the load/store path
// of ucx, the failed work requests of verbs).
#pragma once

#include "rails/put_path.hpp"
#include "rails/windows.hpp"

#include "base/blob.hpp"
#include "base/error.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace pmr::detail::rails {

/// A send window's state: the sender of the put path. `by_message`: rounds are signalled by
/// messages (Transport::signal), else by the slot and sequence puts.
template <class Transport, bool by_message>
struct SendState {
    using Process = typename Transport::Process;
    using Connection = typename Transport::Connection;

    explicit SendState(const WindowSpec& spec)
        : where(spec.where), rails(Process::instance(*spec.where), spec.where) {}

    const std::string& at() const noexcept { return *where; }
    /// False if the device or the peer may still read from this state (then it is kept).
    bool close() { return rails.close(); }
    Blob describe() const { return rails.describe(); }
    /// @throws ProviderError for a receive window's description this provider cannot have made.
    RecvDescription connect(Connection& connection, const Blob& peer, std::size_t peer_bytes) {
        BlobReader reader(peer, at());
        const RecvDescription description =
            rails.connect(connection, reader, by_message, peer_bytes);
        const Blob provider_part = reader.get_bytes();
        reader.finish();
        if (!provider_part.empty()) {
            reader.malformed("the receive window's provider part has " +
                             std::to_string(provider_part.size()) + " B, expected none");
        }
        return description;
    }
    void post(const std::byte* data, std::size_t bytes) { rails.post(data, bytes); }
    void post(const std::byte* data, const RailRange* ranges, std::size_t count) {
        rails.post(data, ranges, count);
    }
    void post(const std::byte* data, const RailSlice* slices, std::size_t count,
              std::size_t element_size) {
        rails.post(data, slices, count, element_size);
    }
    bool test() { return rails.progress(); }
    bool peer_gone() const noexcept { return rails.receiver_closed(); }

    const std::string* where;
    RailSender<Transport> rails;
};

/// A receive window's state: the receiver of the put path.
template <class Transport>
struct RecvState {
    using Process = typename Transport::Process;
    using Connection = typename Transport::Connection;

    explicit RecvState(const WindowSpec& spec)
        : RecvState(spec, Process::instance(*spec.where), 0) {}
    /// `staging`: bytes of staging area behind the inbox (RailReceiver).
    RecvState(const WindowSpec& spec, const std::shared_ptr<Process>& process, std::size_t staging)
        : where(spec.where), rails(process, spec.where, spec.buffer, spec.bytes, staging) {}

    const std::string& at() const noexcept { return *where; }
    /// False if the peer may still write into this state (then it is kept).
    bool close() { return rails.close(); }
    Blob describe() const { return rails.describe(Blob{}); }
    void connect(Connection& connection, const Blob& peer, std::size_t /*peer_bytes*/) {
        rails.connect(connection, peer, /*map_cell=*/false);
    }
    void init() { rails.init(); }
    bool test() { return rails.test(); }
    std::size_t received_bytes() const noexcept { return rails.received_bytes(); }
    bool peer_gone() const noexcept { return rails.sender_closed(); }

    const std::string* where;
    RailReceiver<Transport> rails;
};

// -------------------------------------------------------------------------------------------------
// The windows' members
// -------------------------------------------------------------------------------------------------

template <class Provider, bool sends>
Window<Provider, sends>::Window(const WindowSpec& spec) : state_(std::make_unique<State>(spec)) {}

template <class Provider, bool sends>
Window<Provider, sends>::Window(Window&& other) noexcept = default;

template <class Provider, bool sends>
Window<Provider, sends>& Window<Provider, sends>::operator=(Window&& other) noexcept = default;

template <class Provider, bool sends>
Window<Provider, sends>::~Window() {
    if (state_ && !state_->close()) {
        // The device or the peer may still touch this state: keep it, better leaked than reused.
        (void)state_.release(); // NOLINT(bugprone-unused-return-value)
    }
}

template <class Provider, bool sends>
Blob Window<Provider, sends>::describe() const {
    return state_->describe();
}

template <class Provider, bool sends>
void Window<Provider, sends>::connect(Connection& connection, const Blob& peer,
                                      std::size_t peer_bytes) {
    (void)state_->connect(connection, peer, peer_bytes);
}

template <class Provider, bool sends>
bool Window<Provider, sends>::test() {
    return state_->test();
}

template <class Provider, bool sends>
bool Window<Provider, sends>::peer_gone() const noexcept {
    return state_->peer_gone();
}

template <class Provider, bool sends>
std::uint64_t Window<Provider, sends>::withdrawal_key() const noexcept {
    return state_ ? state_->rails.id() : 0;
}

template <class Provider, bool sends>
void Window<Provider, sends>::peer_withdrew(std::uint64_t key) noexcept {
    if (auto process = State::Process::existing()) {
        process->registry().peer_withdrew(key);
    }
}

template <class Provider>
void SendWindow<Provider>::post(const std::byte* data, std::size_t bytes) {
    this->state_->post(data, bytes);
}

template <class Provider>
void SendWindow<Provider>::post(const std::byte* data, const RailRange* ranges, std::size_t count) {
    this->state_->post(data, ranges, count);
}

template <class Provider>
void SendWindow<Provider>::post(const std::byte* data, const RailSlice* slices, std::size_t count,
                                std::size_t element_size) {
    this->state_->post(data, slices, count, element_size);
}

template <class Provider>
void RecvWindow<Provider>::init() {
    this->state_->init();
}

template <class Provider>
std::size_t RecvWindow<Provider>::received_bytes() const noexcept {
    return this->state_->received_bytes();
}

} // namespace pmr::detail::rails

/// Instantiates the windows of rails provider `Provider` in its .cpp, after their State.
#define PMR_RAILS_WINDOWS(Provider)                                                                \
    template class rails::Window<Provider, rails::send>;                                           \
    template class rails::Window<Provider, rails::receive>;                                        \
    template class rails::SendWindow<Provider>;                                                    \
    template class rails::RecvWindow<Provider>
