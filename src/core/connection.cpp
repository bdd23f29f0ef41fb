// SPDX-License-Identifier: MIT
// Connections: the provider is decided before any provider resource exists, exactly one provider
// connection is made, and windows created before the decision get their provider window with it.
#include "base/environment.hpp"
#include "base/error.hpp"
#include "base/library_target.hpp"
#include "base/node.hpp"
#include "core/state.hpp"

#include <algorithm>
#include <mutex>
#include <unistd.h>
#include <utility>

namespace pmr {
namespace detail {
namespace {

constexpr std::uint32_t hello_version = 2;
constexpr std::int16_t undecided = -1;

std::string name_of(const std::optional<Provider>& p) {
    return p ? std::string(to_string(*p)) : std::string("no provider");
}

// Checks a provider forced by argument against the target.
void check_forced(const Target& target, Provider forced, const std::string& where) {
    if (!is_compiled(forced)) {
        raise<ArgumentError>("provider " + std::string(to_string(forced)) +
                                 " is not compiled into this build",
                             where, "Compiled providers: " + compiled_providers_string() + ".");
    }
    const bool fits = target.is_null()           ? forced == Provider::null
                      : forced == Provider::null ? false
                      : forced == Provider::self ? target.is_self()
                                                 : true;
    if (!fits) {
        raise<ArgumentError>("provider " + std::string(to_string(forced)) +
                                 " cannot serve this target",
                             where, "null serves MPI_PROC_NULL only, self the own rank only.");
    }
}

// Connections whose provider waits for the peer's hello, answered from every set-up wait.
struct Undecided {
    std::mutex mutex;
    std::vector<ConnectionState*> connections;
};

Undecided& undecided_connections() {
    static auto* registry = new Undecided(); // never destroyed: connections may outlive statics
    return *registry;
}

void add_undecided(ConnectionState* connection) {
    auto& registry = undecided_connections();
    std::lock_guard<std::mutex> lock(registry.mutex);
    registry.connections.push_back(connection);
}

void remove_undecided(ConnectionState* connection) noexcept {
    auto& registry = undecided_connections();
    std::lock_guard<std::mutex> lock(registry.mutex);
    auto& list = registry.connections;
    list.erase(std::remove(list.begin(), list.end(), connection), list.end());
}

PeerInfo peer_info(const PeerRecord& record) {
    PeerInfo peer;
    peer.pid = record.pid;
    peer.node = record.node;
    peer.same_node = record.node_key == node_key();
    return peer;
}

/// The provider's part of this side's hello: what the local object made before the handshake
/// has to say, or nothing while no provider is decided.
template <class Locals>
Blob hello_of(const Locals& locals) {
    Blob hello;
    std::visit(
        [&](const auto& local) {
            if constexpr (!std::is_same_v<std::decay_t<decltype(local)>, std::monostate>) {
                hello = local.hello();
            }
        },
        locals);
    return hello;
}

} // namespace

void answer_hellos() noexcept {
    auto& registry = undecided_connections();
    std::unique_lock<std::mutex> lock(registry.mutex, std::try_to_lock);
    if (!lock.owns_lock()) {
        return; // another thread is answering
    }
    auto& list = registry.connections;
    list.erase(
        std::remove_if(list.begin(), list.end(),
                       [](ConnectionState* connection) { return connection->answer_hello(); }),
        list.end());
}

ConnectionState::ConnectionState(Target target, std::optional<Provider> forced)
    : target_(std::move(target)), forced_(forced) {
    const std::string where = describe();
    if (forced_) {
        check_forced(target_, *forced_, where);
    }
    if (target_.is_null() && (!forced_ || *forced_ == Provider::null)) {
        // MPI_PROC_NULL: nothing to exchange, nothing to wait for.
        decide(Provider::null, where);
        established_ = true;
        native_.emplace<Null::Connection>(std::get<Null::Local>(std::move(local_)),
                                          ConnectionSetup{&target_, where}, PeerInfo{}, Blob{});
        local_ = std::monostate{};
        return;
    }
    if (!forced_ && !target_.is_self()) {
        forced_ = provider_from_environment("rank " + std::to_string(target_.own_rank()) +
                                            " -> peer " + std::to_string(target_.rank()));
    }
    link_ = std::make_unique<bootstrap::SetupLink>(target_);
    if (forced_) {
        decide(*forced_, where);
    } else if (target_.is_self()) {
        decide(Provider::self, where);
    } else if (auto known = link_->known_peer()) {
        if (auto chosen = choose_provider(peer_info(*known), compiled_mask())) {
            peer_ = peer_info(*known);
            decide(*chosen, where);
        }
    }
    if (!decided_) {
        add_undecided(this);
    }
    BlobWriter hello;
    hello.put(hello_version).put(static_cast<std::int32_t>(getpid())).put_string(node_name());
    hello.put(compiled_mask());
    hello.put<std::uint8_t>(forced_ ? 1 : 0);
    hello.put<std::int16_t>(decided_ ? static_cast<std::int16_t>(provider_) : undecided);
    const Blob provider_hello = hello_of(local_);
    hello.put_bytes(provider_hello);
    link_->send(bootstrap::Kind::hello, 0, hello.take());
}

ConnectionState::~ConnectionState() {
    remove_undecided(this);
}

void ConnectionState::decide(Provider provider, const std::string& where) {
    const ConnectionSetup setup{&target_, where};
    Compiled::dispatch(provider, [&](auto p) {
        using P = decltype(p);
        local_.emplace<typename P::Local>(setup);
    });
    provider_ = provider;
    decided_ = true;
    debug_log("provider " + std::string(to_string(provider)) + " for " + describe());
}

void ConnectionState::establish() {
    if (established_) {
        return;
    }
    std::lock_guard<std::recursive_mutex> lock(setup_mutex_);
    if (setup_error_) {
        std::rethrow_exception(setup_error_);
    }
    try {
        complete_handshake();
    } catch (const Timeout&) {
        throw; // the peer may just be slow: establish() can be called again
    } catch (...) {
        setup_error_ = std::current_exception(); // the peer's hello is consumed: final
        throw;
    }
}

pid_t ConnectionState::watch_pid() const noexcept {
    return peer_ && peer_->same_node ? peer_->pid : 0;
}

bool ConnectionState::answer_hello() noexcept {
    std::unique_lock<std::recursive_mutex> lock(setup_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
        return false; // in use on another thread, which answers for itself
    }
    if (decided_ || hello_taken_ || setup_error_) {
        return true;
    }
    try {
        auto message = link_->try_receive(bootstrap::Kind::hello, 0);
        if (!message) {
            return false;
        }
        take_hello(*message);
    } catch (...) {
        setup_error_ = std::current_exception();
    }
    return true;
}

Hello parse_hello(const Blob& message, const std::string& where) {
    BlobReader reader(message, where);
    if (reader.get<std::uint32_t>() != hello_version) {
        raise<ProviderError>("the peer speaks another set-up protocol version", where,
                             "Link every rank against the same pmr version.");
    }
    Hello hello;
    hello.pid = reader.get<std::int32_t>();
    hello.node = reader.get_string();
    hello.mask = reader.get<std::uint32_t>();
    hello.forced = reader.get<std::uint8_t>() != 0;
    const auto choice = reader.get<std::int16_t>();
    hello.provider_hello = reader.get_bytes();
    reader.finish();
    if (hello.pid <= 0) {
        reader.malformed("pid " + std::to_string(hello.pid));
    }
    if (choice < undecided || choice >= 32 ||
        (choice >= 0 && (hello.mask >> static_cast<unsigned>(choice) & 1U) == 0)) {
        reader.malformed("provider " + std::to_string(choice) + " is not among the peer's");
    }
    if (choice >= 0) {
        hello.choice = static_cast<Provider>(choice);
    }
    return hello;
}

void ConnectionState::take_hello(const Blob& message) {
    const std::string where = describe();
    Hello hello = parse_hello(message, where);
    PeerInfo peer;
    peer.pid = hello.pid;
    peer.node = hello.node;
    peer.same_node = peer.node == node_name();
    peer_mask_ = hello.mask;
    peer_forced_ = hello.forced;
    peer_provider_hello_ = std::move(hello.provider_hello);
    hello_taken_ = true;
    if (peer_ && peer_->same_node != peer.same_node) {
        raise<ProviderError>("the node map and the peer's hello disagree on whether the peer "
                             "runs on this node (" +
                                 peer.node + ")",
                             where, "Set PMR_PROVIDER to choose the provider by hand.");
    }
    peer_ = peer;
    link_->learn(PeerRecord{peer.pid, hash_node_name(peer.node), peer.node});
    peer_choice_ = hello.choice;
    if (forced_.has_value() != peer_forced_ ||
        (forced_ && peer_forced_ && peer_choice_ && *peer_choice_ != *forced_)) {
        raise<ArgumentError>(
            "this side forces " + name_of(forced_) + " but the peer forces " +
                (peer_forced_ ? name_of(peer_choice_) : std::string("no provider")),
            where,
            "Force the same provider on both sides (PMR_PROVIDER or the "
            "Connection argument), or on neither.");
    }
    if (decided_) {
        return;
    }
    const auto chosen = choose_provider(peer, compiled_mask() & peer_mask_);
    if (!chosen) {
        raise<ProviderError>(
            "no provider reaches the peer (this side has " + compiled_providers_string() +
                ", the peer runs on " + (peer.same_node ? "this node" : "another node") + ")",
            where,
            "Build pmr with a network provider (e.g. -DPMR_WITH_UCX=ON) to connect ranks on "
            "different nodes.");
    }
    decide(*chosen, where);
    const Blob provider_hello = hello_of(local_);
    link_->send(
        bootstrap::Kind::provider_hello, 0,
        BlobWriter().put(static_cast<std::int16_t>(provider_)).put_bytes(provider_hello).take());
    // Windows created before the decision get their provider window and send their description,
    // so that the peer's first use of them does not wait for this side's.
    for (auto* window : pending_sends_) {
        window->materialize_late();
    }
    for (auto* window : pending_recvs_) {
        window->materialize_late();
    }
    pending_sends_.clear();
    pending_recvs_.clear();
}

void ConnectionState::complete_handshake() {
    const std::string where = describe();
    if (!hello_taken_) {
        remove_undecided(this); // this wait answers it; other waits must not take its hello
        try {
            take_hello(
                link_->receive(bootstrap::Kind::hello, 0, {&where, watch_pid(), &answer_hellos}));
        } catch (const Timeout&) {
            add_undecided(this);
            throw;
        }
    }
    Provider their_provider = provider_;
    Blob their_hello = std::move(peer_provider_hello_);
    if (peer_choice_) {
        their_provider = *peer_choice_;
    } else {
        // The peer chose at its handshake too: its provider's hello comes on its own.
        const Blob late = link_->receive(bootstrap::Kind::provider_hello, 0,
                                         {&where, watch_pid(), &answer_hellos});
        BlobReader late_reader(late, where);
        const auto id = late_reader.get<std::int16_t>();
        their_hello = late_reader.get_bytes();
        late_reader.finish();
        if (id < 0 || (peer_mask_ >> static_cast<unsigned>(id) & 1U) == 0) {
            late_reader.malformed("a bad provider in the provider hello");
        }
        their_provider = static_cast<Provider>(id);
    }
    if (their_provider != provider_) {
        raise<ProviderError>("the peer chose provider " + std::string(to_string(their_provider)) +
                                 ", this side " + std::string(to_string(provider_)),
                             where,
                             "Run every rank with the same pmr build and settings, or force one "
                             "provider with PMR_PROVIDER.");
    }
    const ConnectionSetup setup{&target_, where};
    Compiled::dispatch(provider_, [&](auto p) {
        using P = decltype(p);
        native_.emplace<typename P::Connection>(std::get<typename P::Local>(std::move(local_)),
                                                setup, *peer_, their_hello);
    });
    local_ = std::monostate{};
    established_ = true;
    debug_log("established " + describe() + (peer_->same_node ? ", peer on this node" : ""));
}

void ConnectionState::forget(WindowState<Side::send>* window) noexcept {
    std::lock_guard<std::recursive_mutex> lock(setup_mutex_);
    pending_sends_.erase(std::remove(pending_sends_.begin(), pending_sends_.end(), window),
                         pending_sends_.end());
}

void ConnectionState::forget(WindowState<Side::recv>* window) noexcept {
    std::lock_guard<std::recursive_mutex> lock(setup_mutex_);
    pending_recvs_.erase(std::remove(pending_recvs_.begin(), pending_recvs_.end(), window),
                         pending_recvs_.end());
}

std::size_t ConnectionState::rails() {
    establish();
    return std::visit(
        [](auto& c) -> std::size_t {
            if constexpr (std::is_same_v<std::decay_t<decltype(c)>, std::monostate>) {
                return 0;
            } else {
                return c.rails();
            }
        },
        native_);
}

RailInfo ConnectionState::rail(std::size_t index) {
    const std::size_t count = rails();
    if (index >= count) {
        raise<ArgumentError>("rail " + std::to_string(index) + " does not exist", describe(),
                             "The connection has " + std::to_string(count) +
                                 " rail(s); see Connection::rails().");
    }
    return std::visit(
        [&](auto& c) -> RailInfo {
            if constexpr (std::is_same_v<std::decay_t<decltype(c)>, std::monostate>) {
                return {};
            } else {
                return c.rail(index);
            }
        },
        native_);
}

bool ConnectionState::peer_alive() {
    return std::visit(
        [](auto& c) {
            if constexpr (std::is_same_v<std::decay_t<decltype(c)>, std::monostate>) {
                return true;
            } else {
                return c.peer_alive();
            }
        },
        native_);
}

std::string ConnectionState::describe() const {
    std::string text = "rank " + std::to_string(target_.own_rank()) + " -> peer ";
    text += target_.is_null() ? "MPI_PROC_NULL" : std::to_string(target_.rank());
    text += " (send tag " + std::to_string(target_.send_tag()) + ", recv tag " +
            std::to_string(target_.recv_tag()) + ", provider ";
    text += decided_ ? std::string(to_string(provider_)) : std::string("not yet chosen");
    if (TargetAccess::is_library(target_)) {
        text += ", pmr-internal";
    }
    return text + ")";
}

} // namespace detail

Connection::Connection() noexcept = default;

Connection::Connection(const Target& target)
    : state_(std::make_shared<detail::ConnectionState>(target, std::nullopt)) {}

Connection::Connection(const Target& target, Provider provider)
    : state_(std::make_shared<detail::ConnectionState>(target, provider)) {}

Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

detail::ConnectionState& Connection::checked() const {
    if (!state_) {
        detail::raise<UsageError>("use of an empty Connection (default-constructed or moved from)",
                                  "", "Assign a connection made from a Target first.");
    }
    return *state_;
}

void Connection::establish() {
    checked().establish();
}

bool Connection::established() const {
    return checked().established();
}

std::optional<Provider> Connection::chosen_provider() const {
    return checked().chosen_provider();
}

Provider Connection::provider() {
    auto& state = checked();
    state.establish();
    return state.provider();
}

std::size_t Connection::rails() {
    return checked().rails();
}

RailInfo Connection::rail(std::size_t index) {
    return checked().rail(index);
}

const Target& Connection::target() const {
    return checked().target();
}

std::string Connection::describe() const {
    return checked().describe();
}

} // namespace pmr
