// SPDX-License-Identifier: MIT
#include "bootstrap/mailbox.hpp"

#include "base/backoff.hpp"
#include "base/error.hpp"
#include "base/node.hpp"
#include "base/peer_process.hpp"

#include <pmr/settings.hpp>
#include <pmr/target.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <utility>
#include <vector>

namespace pmr::detail {
namespace bootstrap {
namespace {

constexpr std::uint32_t magic = 0x706d7232; // "pmr2"

struct Header {
    std::uint32_t magic;
    std::uint32_t space;
    std::uint32_t ordinal;
    std::uint32_t kind;
    std::uint32_t index;
    std::int32_t recv_tag; ///< the sender's receive tag (its send tag is the MPI tag)
};

[[noreturn]] void fail(int rc, const char* call) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(rc, text, &length);
    raise<BootstrapError>(std::string(call) + " failed: " + text, "connection set-up",
                          "pmr needs a working MPI while connections and windows are created "
                          "and first used.");
}

void check(int rc, const char* call) {
    if (rc != MPI_SUCCESS) {
        fail(rc, call);
    }
}

const char* kind_text(std::uint32_t kind) {
    switch (static_cast<Kind>(kind)) {
    case Kind::hello:
        return "connection";
    case Kind::send_window:
        return "send window";
    case Kind::recv_window:
        return "receive window";
    case Kind::provider_hello:
        return "provider hello";
    case Kind::withdrawn:
        return "withdrawal";
    }
    return "unknown";
}

// Connections of one (communicator, space, peer, tags) are numbered in creation order on both
// sides; the numbers of destroyed connections are remembered compactly, so that their late
// messages are dropped instead of accumulating.
class Ordinals {
public:
    std::uint32_t next() noexcept { return next_++; }
    void retire(std::uint32_t ordinal) {
        retired_.insert(ordinal);
        while (!retired_.empty() && *retired_.begin() == below_) {
            retired_.erase(retired_.begin());
            ++below_;
        }
    }
    bool retired(std::uint32_t ordinal) const {
        return ordinal < below_ || retired_.count(ordinal) != 0;
    }

private:
    std::uint32_t next_ = 0;
    std::uint32_t below_ = 0; ///< every ordinal below it is retired
    std::set<std::uint32_t> retired_;
};

// Process-wide state of the set-up traffic. Guarded by a mutex so that set-up from several threads
// (with MPI_THREAD_MULTIPLE) stays consistent.
struct PostOffice {
    // Communicators are told apart by a generation number, not by their handle: MPI reuses the
    // handle of a freed communicator, and a new communicator must start counting afresh.
    // (generation, space, peer, send tag, recv tag) as the receiving connection sees them: a
    // message's key has the sender's receive tag as send tag and its send tag as receive tag.
    using LinkKey = std::tuple<std::uint64_t, std::uint32_t, int, int, int>;
    using InboxKey = std::tuple<LinkKey, std::uint32_t, std::uint32_t, std::uint32_t>;

    struct Outgoing {
        MPI_Request request;
        std::unique_ptr<Blob> buffer;
    };

    std::mutex mutex;
    std::map<LinkKey, Ordinals> ordinals;
    std::map<InboxKey, Blob> inbox;
    // Windows the peer withdrew, keyed by the peer's window kind and index (Kind::withdrawn), and
    // what to run when the peer withdraws the window matching one this side withdrew.
    std::set<InboxKey> withdrawn;
    std::map<InboxKey, std::function<void()>> on_withdrawal;
    std::set<std::uint64_t> freed; ///< generations of communicators freed while pmr used them
    /// The error of a malformed message taken in where nothing can be reported (a destructor):
    /// the next set-up call that looks for a message raises it.
    std::exception_ptr unreported;
    std::vector<Outgoing> outgoing;
    std::atomic<std::thread::id> setup_thread{};
    std::uint64_t next_generation = 1;
    std::map<int, PeerRecord> peers; ///< by rank in MPI_COMM_WORLD, from handshakes and node maps

    // Everything known about a communicator that is being freed.
    void forget(std::uint64_t generation) {
        auto drop = [generation](auto& table, auto first_of) {
            for (auto it = table.begin(); it != table.end();) {
                it = std::get<0>(first_of(it->first)) == generation ? table.erase(it)
                                                                    : std::next(it);
            }
        };
        drop(ordinals, [](const LinkKey& k) { return k; });
        drop(inbox, [](const InboxKey& k) { return std::get<0>(k); });
        for (auto it = withdrawn.begin(); it != withdrawn.end();) {
            it = std::get<0>(std::get<0>(*it)) == generation ? withdrawn.erase(it) : std::next(it);
        }
        drop(on_withdrawal, [](const InboxKey& k) { return std::get<0>(k); });
        freed.insert(generation);
    }

    // Completed sends release their buffers; incomplete ones stay (small messages complete
    // eagerly).
    void collect_sends() {
        for (auto it = outgoing.begin(); it != outgoing.end();) {
            int done = 0;
            check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
            it = done != 0 ? outgoing.erase(it) : std::next(it);
        }
        sends_in_flight.store(outgoing.size(), std::memory_order_relaxed);
    }

    // Moves every message that has arrived from `peer` with `tag` (MPI_ANY_TAG only on pmr's own
    // duplicates) into the inbox, after checking its header.
    void collect_incoming(MPI_Comm comm, std::uint64_t generation, int peer, int tag, int base) {
        for (;;) {
            int found = 0;
            MPI_Message message = MPI_MESSAGE_NULL;
            MPI_Status status;
            check(MPI_Improbe(peer, tag, comm, &found, &message, &status), "MPI_Improbe");
            if (found == 0) {
                return;
            }
            int count = 0;
            check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
            Blob data(static_cast<std::size_t>(count));
            check(MPI_Mrecv(data.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE),
                  "MPI_Mrecv");
            const std::string from =
                "from rank " + std::to_string(peer) + ", MPI tag " + std::to_string(status.MPI_TAG);
            Header h{};
            if (data.size() < sizeof h ||
                (std::memcpy(&h, data.data(), sizeof h), h.magic != magic)) {
                raise<BootstrapError>(
                    "a message of " + std::to_string(count) +
                        " B on pmr's set-up tags is not a pmr set-up message",
                    from,
                    "pmr uses the tags above MPI_TAG_UB / 2 of communicators not wrapped by "
                    "pmr::Communicator: the application must not send with those tags, and all "
                    "ranks must run the same pmr version.");
            }
            if (h.kind < static_cast<std::uint32_t>(Kind::hello) ||
                h.kind > static_cast<std::uint32_t>(Kind::withdrawn) || h.space > 1 ||
                h.recv_tag < 0 || h.recv_tag > base) {
                raise<BootstrapError>("a malformed pmr set-up message (kind " +
                                          std::to_string(h.kind) + ", space " +
                                          std::to_string(h.space) + ")",
                                      from, "All ranks must run the same pmr version.");
            }
            data.erase(data.begin(), data.begin() + sizeof h);
            // The sender's send tag is our receive tag and its receive tag our send tag.
            const LinkKey link{generation, h.space, peer, h.recv_tag, status.MPI_TAG - base};
            if (h.kind == static_cast<std::uint32_t>(Kind::withdrawn)) {
                take_withdrawal(link, h, data, from);
                continue;
            }
            auto known = ordinals.find(link);
            if (known != ordinals.end() && known->second.retired(h.ordinal)) {
                continue; // for a connection this side has destroyed already
            }
            const InboxKey key{link, h.ordinal, h.kind, h.index};
            if (!inbox.emplace(key, std::move(data)).second) {
                raise<BootstrapError>(std::string("a duplicate set-up message (") +
                                          kind_text(h.kind) + " #" + std::to_string(h.index) +
                                          " of connection #" + std::to_string(h.ordinal) + ")",
                                      from, "All ranks must run the same pmr version.");
            }
        }
    }

    // The peer withdrew one of its windows: run what this side waits for on that, or remember it
    // for this side's matching window (which then fails with a UsageError at its first use).
    void take_withdrawal(const LinkKey& link, const Header& h, const Blob& data,
                         const std::string& from) {
        std::uint32_t window_kind = 0;
        if (data.size() == sizeof window_kind) {
            std::memcpy(&window_kind, data.data(), sizeof window_kind);
        }
        if (window_kind != static_cast<std::uint32_t>(Kind::send_window) &&
            window_kind != static_cast<std::uint32_t>(Kind::recv_window)) {
            raise<BootstrapError>("a malformed pmr set-up message (withdrawal of " +
                                      std::to_string(data.size()) + " B, window kind " +
                                      std::to_string(window_kind) + ")",
                                  from, "All ranks must run the same pmr version.");
        }
        const InboxKey key{link, h.ordinal, window_kind, h.index};
        auto waiting = on_withdrawal.find(key);
        if (waiting != on_withdrawal.end()) {
            // Both sides withdrew: a description the peer sent before its withdrawal (MPI keeps
            // their order) is of no use either.
            inbox.erase(key);
            auto run = std::move(waiting->second);
            on_withdrawal.erase(waiting);
            if (run) {
                run();
            }
            return;
        }
        auto known = ordinals.find(link);
        if (known == ordinals.end() || !known->second.retired(h.ordinal)) {
            withdrawn.insert(key);
        }
    }

    // What the inbox holds from `peer` on `generation`, for the warning of a stuck set-up.
    std::string unclaimed_from(std::uint64_t generation, int peer) const {
        std::string text;
        for (const auto& [key, data] : inbox) {
            const auto& [link, ordinal, kind, index] = key;
            if (std::get<0>(link) != generation || std::get<2>(link) != peer) {
                continue;
            }
            text += text.empty() ? "" : "; ";
            text += std::string(kind_text(kind)) +
                    (kind == static_cast<std::uint32_t>(Kind::send_window) ||
                             kind == static_cast<std::uint32_t>(Kind::recv_window)
                         ? " #" + std::to_string(index) + " of"
                         : std::string()) +
                    " connection #" + std::to_string(ordinal) + " with send tag " +
                    std::to_string(std::get<4>(link)) + ", recv tag " +
                    std::to_string(std::get<3>(link)) +
                    (std::get<1>(link) == 1 ? " (pmr-internal)" : "");
        }
        return text;
    }
};

PostOffice& post_office() {
    static auto* office = new PostOffice(); // never destroyed: MPI may be finalised by then
    return *office;
}

// Called by MPI when a communicator pmr has used is freed (or at MPI_Finalize).
int forget_communicator(MPI_Comm /*comm*/, int /*keyval*/, void* value, void* /*extra*/) {
    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    office.forget(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(value)));
    return MPI_SUCCESS;
}

// The generation of `comm`, kept in an attribute of the communicator. Dup'ed communicators do not
// inherit it (MPI_COMM_NULL_COPY_FN).
std::uint64_t generation_of(MPI_Comm comm) {
    static const int keyval = [] {
        int k = MPI_KEYVAL_INVALID;
        check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, forget_communicator, &k, nullptr),
              "MPI_Comm_create_keyval");
        return k;
    }();
    void* value = nullptr;
    int found = 0;
    check(MPI_Comm_get_attr(comm, keyval, &value, &found), "MPI_Comm_get_attr");
    if (found != 0) {
        return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(value));
    }
    std::uint64_t generation = 0;
    {
        auto& office = post_office();
        std::lock_guard<std::mutex> lock(office.mutex);
        generation = office.next_generation++;
    }
    // The attribute value is the number itself, stored in the pointer: never dereferenced.
    void* stored = reinterpret_cast<void*>(static_cast<std::uintptr_t>(generation)); // NOLINT
    check(MPI_Comm_set_attr(comm, keyval, stored), "MPI_Comm_set_attr");
    return generation;
}

int tag_base() {
    static const int base = [] {
        void* value = nullptr;
        int flag = 0;
        check(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag), "MPI_Comm_get_attr");
        int upper = flag != 0 ? *static_cast<int*>(value) : 32767;
        return upper / 2;
    }();
    return base;
}

// Rank of `rank` of `comm` in MPI_COMM_WORLD, or -1 (e.g. a process from MPI_Comm_spawn).
int world_rank_of(MPI_Comm comm, int rank) {
    MPI_Group group = MPI_GROUP_NULL;
    MPI_Group world = MPI_GROUP_NULL;
    check(MPI_Comm_group(comm, &group), "MPI_Comm_group");
    check(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
    int translated = MPI_UNDEFINED;
    const int rc = MPI_Group_translate_ranks(group, 1, &rank, world, &translated);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    check(rc, "MPI_Group_translate_ranks");
    return translated == MPI_UNDEFINED ? -1 : translated;
}

// Whether the launcher says that every rank of MPI_COMM_WORLD runs on this node (Open MPI, MPICH's
// Hydra, Slurm), so that connections on any communicator can choose their provider at
// construction. PMR_LAUNCHER_HINTS=0 ignores it (then the first connection to each peer decides at
// its handshake).
bool single_node_job() {
    static const bool single = [] {
        if (!settings().launcher_hints) {
            return false;
        }
        int world = 0;
        MPI_Comm_size(MPI_COMM_WORLD, &world);
        auto number = [](const char* name) -> long {
            const auto text = settings::environment(name);
            if (!text) {
                return -1;
            }
            char* end = nullptr;
            const long value = std::strtol(text->c_str(), &end, 10);
            return *end == '\0' ? value : -1;
        };
        const std::pair<const char*, const char*> local_and_total[] = {
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE"},
            {"MPI_LOCALNRANKS", "PMI_SIZE"},
        };
        for (const auto& [local, total] : local_and_total) {
            if (number(local) > 0 && number(local) == world && number(total) == world) {
                return true;
            }
        }
        return number("SLURM_STEP_NUM_NODES") == 1 && number("SLURM_STEP_NUM_TASKS") == world;
    }();
    return single;
}

void note_setup_thread() noexcept {
    post_office().setup_thread.store(std::this_thread::get_id(), std::memory_order_relaxed);
}

} // namespace

bool mpi_active() noexcept {
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized != 0 && finalized == 0;
}

void world_position(int& rank, int& size) noexcept {
    rank = 0;
    size = 1;
    if (mpi_active()) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
}

int max_user_tag() {
    return tag_base();
}

namespace {
std::atomic<void (*)() noexcept> finalize_hook{nullptr};

int run_finalize_hook(MPI_Comm /*comm*/, int /*keyval*/, void* /*value*/, void* /*extra*/) {
    if (auto hook = finalize_hook.exchange(nullptr)) {
        hook();
    }
    return MPI_SUCCESS;
}
} // namespace

void at_finalize(void (*hook)() noexcept) {
    if (finalize_hook.exchange(hook) != nullptr) {
        return; // the attribute is set already
    }
    int keyval = MPI_KEYVAL_INVALID;
    check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, run_finalize_hook, &keyval, nullptr),
          "MPI_Comm_create_keyval");
    check(MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr), "MPI_Comm_set_attr");
}

SetupLink::SetupLink(const Target& target)
    : record_(target.record()), peer_(target.rank()), own_rank_(target.own_rank()),
      send_tag_(target.send_tag()), recv_tag_(target.recv_tag()),
      space_(target.is_library() ? 1U : 0U) {
    note_setup_thread();
    comm_ = record_ ? record_->setup : target.comm();
    generation_ = generation_of(comm_);
    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    ordinal_ =
        office.ordinals[PostOffice::LinkKey{generation_, space_, peer_, send_tag_, recv_tag_}]
            .next();
}

SetupLink::~SetupLink() {
    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    // Take what the peer sent for this connection out of MPI, so that the messages of connections
    // that were never used do not pile up there (only from the thread that makes set-up calls,
    // and only while MPI runs; the messages still on their way are dropped when they arrive).
    if (office.setup_thread.load(std::memory_order_relaxed) == std::this_thread::get_id() &&
        mpi_active() && office.freed.count(generation_) == 0) {
        try {
            office.collect_incoming(comm_, generation_, peer_, tag_base() + recv_tag_, tag_base());
        } catch (const std::exception&) {
            office.unreported = std::current_exception();
        }
    }
    const PostOffice::LinkKey link{generation_, space_, peer_, send_tag_, recv_tag_};
    auto ordinals = office.ordinals.find(link);
    if (ordinals == office.ordinals.end()) {
        return; // the communicator was freed: nothing is kept for it
    }
    try {
        ordinals->second.retire(ordinal_);
    } catch (const std::bad_alloc&) { // NOLINT(bugprone-empty-catch): late messages then linger
    }
    for (auto it = office.inbox.lower_bound({link, ordinal_, 0, 0});
         it != office.inbox.end() && std::get<0>(it->first) == link &&
         std::get<1>(it->first) == ordinal_;) {
        it = office.inbox.erase(it);
    }
    for (auto it = office.withdrawn.lower_bound({link, ordinal_, 0, 0});
         it != office.withdrawn.end() && std::get<0>(*it) == link &&
         std::get<1>(*it) == ordinal_;) {
        it = office.withdrawn.erase(it);
    }
}

void SetupLink::check_alive() const {
    if (!mpi_active()) {
        raise<BootstrapError>("MPI is finalised",
                              "connection set-up, rank " + std::to_string(own_rank_) + " -> peer " +
                                  std::to_string(peer_),
                              "Create and first use pmr objects between MPI_Init and "
                              "MPI_Finalize.");
    }
    // Called with the office's mutex held.
    if (post_office().freed.count(generation_) != 0) {
        raise<UsageError>(
            "the communicator of this connection was freed before the connection was set up",
            "rank " + std::to_string(own_rank_) + " -> peer " + std::to_string(peer_),
            "Keep the MPI communicator until every connection and window made on it has been "
            "used once, or wrap it in a pmr::Communicator, which keeps what it needs.");
    }
}

void SetupLink::send(Kind kind, std::uint32_t index, const Blob& payload) {
    note_setup_thread();
    Header h{magic, space_, ordinal_, static_cast<std::uint32_t>(kind), index, recv_tag_};
    auto buffer = std::make_unique<Blob>(sizeof h + payload.size());
    std::memcpy(buffer->data(), &h, sizeof h);
    std::copy(payload.begin(), payload.end(), buffer->begin() + sizeof h);

    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    check_alive();
    office.collect_sends();
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Isend(buffer->data(), static_cast<int>(buffer->size()), MPI_BYTE, peer_,
                    tag_base() + send_tag_, comm_, &request),
          "MPI_Isend");
    office.outgoing.push_back({request, std::move(buffer)});
    // Small messages usually complete at once: then nothing counts as in flight, and the data
    // path's waits never call MPI for them (progress_sends()).
    office.collect_sends();
}

void SetupLink::withdraw(Kind own, std::uint32_t index,
                         std::function<void()> on_peer_withdrawn) noexcept {
    auto& office = post_office();
    const Kind peer_kind = own == Kind::send_window ? Kind::recv_window : Kind::send_window;
    const PostOffice::InboxKey key{
        PostOffice::LinkKey{generation_, space_, peer_, send_tag_, recv_tag_}, ordinal_,
        static_cast<std::uint32_t>(peer_kind), index};
    std::function<void()> run_now;
    {
        std::lock_guard<std::mutex> lock(office.mutex);
        if (office.setup_thread.load(std::memory_order_relaxed) != std::this_thread::get_id() ||
            !mpi_active() || office.freed.count(generation_) != 0) {
            return;
        }
        // Take in what the peer sent on this connection: on a connection that lives on while
        // windows come and go unused, nothing else reads the peer's withdrawals, so what waits
        // for them (memory, files, the peer's descriptions) would pile up until the connection
        // goes.
        try {
            office.collect_incoming(comm_, generation_, peer_, tag_base() + recv_tag_, tag_base());
        } catch (const std::exception&) {
            office.unreported = std::current_exception();
        }
        // The peer's description of the matching window, if it came, is of no use any more.
        office.inbox.erase(key);
        try {
            auto done = office.withdrawn.find(key);
            if (done != office.withdrawn.end()) {
                office.withdrawn.erase(done);
                run_now = std::move(on_peer_withdrawn);
            } else {
                // Also when there is nothing to run: the peer's withdrawal is then consumed
                // here instead of being kept as the news of a window this side may still use.
                office.on_withdrawal[key] = std::move(on_peer_withdrawn);
            }
        } catch (const std::bad_alloc&) { // NOLINT(bugprone-empty-catch): kept until exit then
        }
    }
    try {
        send(Kind::withdrawn, index, BlobWriter().put(static_cast<std::uint32_t>(own)).take());
    } catch (const std::exception&) { // NOLINT(bugprone-empty-catch)
        // The peer's matching window then waits for a description that never comes, as it
        // would without the withdrawal (PMR_TIMEOUT ends that wait).
    }
    if (run_now) {
        run_now();
    }
}

std::atomic<std::size_t> sends_in_flight{0};

void progress_sends_in_flight() noexcept {
    auto& office = post_office();
    if (office.setup_thread.load(std::memory_order_relaxed) != std::this_thread::get_id() ||
        !mpi_active()) {
        return;
    }
    std::unique_lock<std::mutex> lock(office.mutex, std::try_to_lock);
    if (!lock.owns_lock()) {
        return; // another thread is in the set-up code, which progresses them
    }
    try {
        office.collect_sends();
    } catch (const std::exception&) { // NOLINT(bugprone-empty-catch)
        // Reported by the set-up call that next needs MPI; the wait goes on until PMR_TIMEOUT.
    }
}

std::optional<Blob> SetupLink::try_receive(Kind kind, std::uint32_t index) {
    note_setup_thread();
    auto& office = post_office();
    const PostOffice::InboxKey key{
        PostOffice::LinkKey{generation_, space_, peer_, send_tag_, recv_tag_}, ordinal_,
        static_cast<std::uint32_t>(kind), index};
    std::lock_guard<std::mutex> lock(office.mutex);
    check_alive();
    if (office.unreported) {
        std::rethrow_exception(std::exchange(office.unreported, nullptr));
    }
    office.collect_sends();
    office.collect_incoming(comm_, generation_, peer_, tag_base() + recv_tag_, tag_base());
    auto it = office.inbox.find(key);
    if (it != office.inbox.end()) {
        Blob message = std::move(it->second);
        office.inbox.erase(it);
        return message;
    }
    // A withdrawal without a description: the peer's window never sent one (its provider was not
    // decided yet). With a description, the caller checks what it can first (sizes) and then
    // asks peer_withdrew().
    if ((kind == Kind::send_window || kind == Kind::recv_window) &&
        office.withdrawn.count(key) != 0) {
        raise<UsageError>(
            "the peer destroyed its " + std::string(kind_text(static_cast<std::uint32_t>(kind))) +
                " #" + std::to_string(index) + " without using it, so this side's window #" +
                std::to_string(index) + " has no partner",
            "rank " + std::to_string(own_rank_) + " -> peer " + std::to_string(peer_) +
                ", send tag " + std::to_string(send_tag_) + ", recv tag " +
                std::to_string(recv_tag_),
            "Windows pair in creation order: both sides must create the k-th window of a "
            "connection and use it, or both destroy it unused.");
    }
    return std::nullopt;
}

bool SetupLink::peer_withdrew(Kind kind, std::uint32_t index) {
    auto& office = post_office();
    const PostOffice::InboxKey key{
        PostOffice::LinkKey{generation_, space_, peer_, send_tag_, recv_tag_}, ordinal_,
        static_cast<std::uint32_t>(kind), index};
    std::lock_guard<std::mutex> lock(office.mutex);
    return office.withdrawn.count(key) != 0;
}

Blob SetupLink::receive(Kind kind, std::uint32_t index, const WaitContext& context) {
    const std::string& where = *context.where;
    PeerProcess watched(context.watch);
    Backoff backoff;
    bool warned = false;
    std::uint32_t polls = 0;
    for (;;) {
        if (auto message = try_receive(kind, index)) {
            return std::move(*message);
        }
        // Other connections' hellos are answered every few polls: often enough that a peer
        // waiting for one of them is not held up, rarely enough that a wait does not probe MPI
        // for every connection on every poll.
        if (context.progress != nullptr && (++polls & 15U) == 0) {
            context.progress();
        }
        if (!backoff.pause()) {
            continue;
        }
        if (!watched.alive()) {
            raise<PeerLost>("the peer process exited before it created its side", where,
                            "Check the peer's output for the reason it died.");
        }
        if (backoff.expired()) {
            raise<Timeout>("the peer did not create its side within PMR_TIMEOUT (" +
                               std::to_string(settings().timeout_seconds) + " s)",
                           where,
                           "Every connection needs a matching Connection on the peer "
                           "(Target(comm, me, recvTag, sendTag)) and every window a matching "
                           "window of the other kind, created in the same order.");
        }
        const double warn_after = settings().warn_after_seconds;
        if (!warned && warn_after > 0 && backoff.elapsed_seconds() >= warn_after) {
            warned = true;
            std::string unclaimed;
            {
                auto& office = post_office();
                std::lock_guard<std::mutex> lock(office.mutex);
                if (record_) {
                    // pmr's own duplicate: every message on it is pmr's, so look at all of them.
                    office.collect_incoming(comm_, generation_, peer_, MPI_ANY_TAG, tag_base());
                } else {
                    // The application's communicator: take pmr's messages (tags from the base
                    // on) as long as one of them is the next from that peer.
                    for (;;) {
                        int found = 0;
                        MPI_Status status;
                        check(MPI_Iprobe(peer_, MPI_ANY_TAG, comm_, &found, &status), "MPI_Iprobe");
                        if (found == 0 || status.MPI_TAG < tag_base()) {
                            break;
                        }
                        office.collect_incoming(comm_, generation_, peer_, status.MPI_TAG,
                                                tag_base());
                    }
                }
                unclaimed = office.unclaimed_from(generation_, peer_);
            }
            std::fprintf(stderr,
                         "pmr: warning: waited %.0f s for the peer's %s%s [%s]. %s. This side "
                         "expects the peer's matching object with send tag %d and recv tag %d "
                         "(its Target(comm, %d, %d, %d)). It keeps waiting%s.\n",
                         backoff.elapsed_seconds(), kind_text(static_cast<std::uint32_t>(kind)),
                         kind == Kind::send_window || kind == Kind::recv_window
                             ? (" #" + std::to_string(index)).c_str()
                             : "",
                         where.c_str(),
                         unclaimed.empty()
                             ? "Nothing from that peer has arrived that no object here took"
                             : ("Unclaimed set-up messages from that peer: " + unclaimed).c_str(),
                         recv_tag_, send_tag_, own_rank_, recv_tag_, send_tag_,
                         settings().timeout_seconds > 0 ? " until PMR_TIMEOUT"
                                                        : " (set PMR_TIMEOUT to give up)");
        }
    }
}

std::optional<PeerRecord> SetupLink::known_peer() const {
    if (record_ && peer_ >= 0 && static_cast<std::size_t>(peer_) < record_->peers.size()) {
        return record_->peers[static_cast<std::size_t>(peer_)];
    }
    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    const int world = world_rank_of(comm_, peer_);
    if (world < 0) {
        return std::nullopt;
    }
    auto it = office.peers.find(world);
    if (it != office.peers.end()) {
        return it->second;
    }
    if (single_node_job()) {
        return PeerRecord{0, node_key(), node_name()};
    }
    return std::nullopt;
}

void SetupLink::learn(const PeerRecord& peer) const {
    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    const int world = world_rank_of(comm_, peer_);
    if (world >= 0) {
        office.peers[world] = peer;
    }
}

} // namespace bootstrap

// -------------------------------------------------------------------------------------------------
// Communicator records
// -------------------------------------------------------------------------------------------------

std::shared_ptr<CommunicatorRecord> CommunicatorRecord::create(MPI_Comm comm, bool owns_comm) {
    auto record = std::make_shared<CommunicatorRecord>();
    record->comm = comm;
    record->owns_comm = owns_comm;
    bootstrap::check(MPI_Comm_dup(comm, &record->setup), "MPI_Comm_dup");
    int size = 0;
    bootstrap::check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    struct Entry {
        std::int32_t pid;
        std::int32_t world_rank;
        std::uint64_t node_key;
    };
    const Entry mine{static_cast<std::int32_t>(getpid()),
                     static_cast<std::int32_t>(bootstrap::world_rank_of(comm,
                                                                        [&] {
                                                                            int rank = 0;
                                                                            MPI_Comm_rank(comm,
                                                                                          &rank);
                                                                            return rank;
                                                                        }())),
                     node_key()};
    std::vector<Entry> all(static_cast<std::size_t>(size));
    bootstrap::check(MPI_Allgather(&mine, sizeof(Entry), MPI_BYTE, all.data(), sizeof(Entry),
                                   MPI_BYTE, record->setup),
                     "MPI_Allgather");
    record->peers.reserve(all.size());
    int on_this_node = 0;
    {
        auto& office = bootstrap::post_office();
        std::lock_guard<std::mutex> lock(office.mutex);
        for (const Entry& e : all) {
            PeerRecord peer{e.pid, e.node_key, {}};
            record->peers.push_back(peer);
            on_this_node += e.node_key == node_key() ? 1 : 0;
            if (e.world_rank >= 0) {
                office.peers.emplace(e.world_rank, peer);
            }
        }
    }
    // More ranks here than CPUs: waits must not spin (base/backoff.hpp).
    SpinPolicy::instance().set_ranks_on_node(on_this_node);
    return record;
}

CommunicatorRecord::~CommunicatorRecord() {
    if (!bootstrap::mpi_active()) {
        return; // MPI_Finalize has released them
    }
    if (setup != MPI_COMM_NULL) {
        MPI_Comm_free(&setup);
    }
    if (owns_comm && comm != MPI_COMM_NULL) {
        MPI_Comm_free(&comm);
    }
}

} // namespace pmr::detail
