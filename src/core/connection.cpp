// SPDX-License-Identifier: MIT
#include "core/environment.hpp"
#include "core/error.hpp"
#include "core/state.hpp"

#include <algorithm>
#include <fstream>
#include <unistd.h>

namespace pmr {
namespace detail {
namespace {

constexpr std::uint32_t hello_version = 1;

// Identifies the operating-system instance: processes with equal node names share memory.
const std::string& node_name() {
    static const std::string name = [] {
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        std::string boot;
        std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
        return std::string(host) + "/" + boot;
    }();
    return name;
}

std::string list(const std::vector<Provider>& providers) {
    std::string text;
    for (Provider p : providers) {
        text += (text.empty() ? "" : ", ") + std::string(to_string(p));
    }
    return text.empty() ? "none" : text;
}

bool contains(const std::vector<Provider>& providers, Provider p) {
    return std::find(providers.begin(), providers.end(), p) != providers.end();
}

std::optional<Provider> provider_from_environment(const Target& target) {
    const auto& name = settings().provider;
    if (!name) {
        return std::nullopt;
    }
    const std::string where =
        "rank " + std::to_string(target.own_rank()) + " -> peer " + std::to_string(target.rank());
    auto provider = provider_from_string(*name);
    if (!provider || !is_compiled(*provider)) {
        raise<ArgumentError>(
            "PMR_PROVIDER=" + *name +
                (provider ? " is not compiled into this build" : " names no provider"),
            where, "Compiled providers: " + compiled_providers_string() + ".");
    }
    if (*provider == Provider::null || *provider == Provider::self) {
        raise<ArgumentError>("PMR_PROVIDER=" + *name + " cannot carry inter-process connections",
                             where,
                             "Use one of: " + compiled_providers_string() + " (not null, self).");
    }
    return provider;
}

Offer make_offer(const Target& target, std::optional<Provider> forced, const std::string& where) {
    Offer offer;
    if (forced) {
        if (!is_compiled(*forced)) {
            raise<ArgumentError>("provider " + std::string(to_string(*forced)) +
                                     " is not compiled into this build",
                                 where, "Compiled providers: " + compiled_providers_string() + ".");
        }
        const bool fits = target.is_null()            ? *forced == Provider::null
                          : *forced == Provider::null ? false
                          : *forced == Provider::self ? target.is_self()
                                                      : true;
        if (!fits) {
            raise<ArgumentError>("provider " + std::string(to_string(*forced)) +
                                     " cannot serve this target",
                                 where, "null serves MPI_PROC_NULL only, self the own rank only.");
        }
        offer.forced = forced;
        offer.candidates = {*forced};
        return offer;
    }
    if (target.is_null()) {
        offer.candidates = {Provider::null};
    } else if (target.is_self()) {
        offer.candidates = {Provider::self};
    } else if ((offer.forced = provider_from_environment(target))) {
        offer.candidates = {*offer.forced};
    } else {
        for (Provider p : compiled_providers()) {
            if (p != Provider::null && p != Provider::self) {
                offer.candidates.push_back(p);
            }
        }
    }
    return offer;
}

} // namespace

Provider select_provider(const Offer& mine, const Offer& theirs, bool same_node,
                         const std::string& where) {
    auto name = [](const std::optional<Provider>& p) {
        return p ? std::string(to_string(*p)) : std::string("no provider");
    };
    if (mine.forced != theirs.forced) {
        raise<ArgumentError>("this side forces " + name(mine.forced) + " but the peer forces " +
                                 name(theirs.forced),
                             where,
                             "Force the same provider on both sides (PMR_PROVIDER or the "
                             "Connection argument), or on neither.");
    }
    for (Provider p : {Provider::null, Provider::self, Provider::shm, Provider::ucx}) {
        if (!contains(mine.candidates, p) || !contains(theirs.candidates, p)) {
            continue;
        }
        if (p == Provider::shm && !same_node && !mine.forced) {
            continue; // a forced shm reports the problem itself, with the node name
        }
        return p;
    }
    raise<ProviderError>(
        "no provider reaches the peer (this side offers " + list(mine.candidates) +
            ", the peer offers " + list(theirs.candidates) + ", " +
            (same_node ? "same node" : "different nodes") + ")",
        where,
        "Build pmr with a network provider (-DPMR_WITH_UCX=ON) to connect ranks on different "
        "nodes.");
}

ConnectionState::ConnectionState(const Target& target, std::optional<Provider> forced)
    : target_(target), offer_(make_offer(target, forced, describe())) {
    if (target.is_null() && (!forced || *forced == Provider::null)) {
        // MPI_PROC_NULL: nothing to exchange, nothing to wait for.
        handshake_ = false;
        established_ = true;
        provider_ = Provider::null;
        native_.emplace<Null::Connection>(ConnectionSetup{&target_, describe()}, PeerInfo{},
                                          Blob{});
        return;
    }
    BlobWriter hello;
    hello.put(hello_version).put(static_cast<std::int32_t>(getpid())).put_string(node_name());
    const std::int16_t forced_id =
        offer_.forced ? static_cast<std::int16_t>(*offer_.forced) : std::int16_t{-1};
    hello.put(forced_id);
    hello.put<std::uint32_t>(static_cast<std::uint32_t>(offer_.candidates.size()));
    const ConnectionSetup setup{&target_, describe()};
    for (Provider p : offer_.candidates) {
        Compiled::dispatch(p, [&](auto provider) {
            using P = decltype(provider);
            hello.put(p).put_bytes(P::hello(setup));
        });
    }
    channel_.emplace(target_);
    channel_->send(bootstrap::Kind::hello, 0, hello.take());
}

void ConnectionState::establish() {
    if (established_) {
        return;
    }
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

void ConnectionState::complete_handshake() {
    const std::string where = describe();
    const Blob message = channel_->receive(bootstrap::Kind::hello, 0, where);
    BlobReader reader(message);
    if (reader.get<std::uint32_t>() != hello_version) {
        raise<ProviderError>("the peer speaks another set-up protocol version", where,
                             "Link every rank against the same pmr version.");
    }
    PeerInfo peer;
    peer.pid = reader.get<std::int32_t>();
    peer.node = reader.get_string();
    peer.same_node = peer.node == node_name();
    Offer theirs;
    if (auto forced = reader.get<std::int16_t>(); forced >= 0) {
        theirs.forced = static_cast<Provider>(forced);
    }
    const auto n = reader.get<std::uint32_t>();
    std::vector<Blob> blobs;
    for (std::uint32_t i = 0; i < n; ++i) {
        theirs.candidates.push_back(reader.get<Provider>());
        blobs.push_back(reader.get_bytes());
    }
    const Provider chosen = select_provider(offer_, theirs, peer.same_node, where);
    const auto at = static_cast<std::size_t>(
        std::find(theirs.candidates.begin(), theirs.candidates.end(), chosen) -
        theirs.candidates.begin());
    const ConnectionSetup setup{&target_, where};
    Compiled::dispatch(chosen, [&](auto provider) {
        using P = decltype(provider);
        native_.emplace<typename P::Connection>(setup, peer, blobs[at]);
    });
    provider_ = chosen;
    established_ = true;
    debug_log("provider " + std::string(to_string(chosen)) + " for " + describe());
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
    text += established_ ? std::string(to_string(provider_)) : std::string("not yet chosen");
    return text + ")";
}

} // namespace detail

Connection::Connection(const Target& target)
    : state_(std::make_shared<detail::ConnectionState>(target, std::nullopt)) {}

Connection::Connection(const Target& target, Provider provider)
    : state_(std::make_shared<detail::ConnectionState>(target, provider)) {}

Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

const detail::ConnectionState& Connection::checked() const {
    if (!state_) {
        detail::raise<UsageError>("use of a moved-from Connection", "");
    }
    return *state_;
}

void Connection::establish() {
    checked();
    state_->establish();
}

Provider Connection::provider() {
    establish();
    return state_->provider();
}

std::size_t Connection::rails() {
    checked();
    return state_->rails();
}

const Target& Connection::target() const noexcept {
    return state_->target();
}

std::string Connection::describe() const {
    return checked().describe();
}

} // namespace pmr
