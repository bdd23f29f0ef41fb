// SPDX-License-Identifier: MIT
#include "bootstrap/mailbox.hpp"

#include "core/backoff.hpp"
#include "core/error.hpp"

#include <pmr/target.hpp>

#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

namespace pmr::detail::bootstrap {
namespace {

constexpr std::uint32_t magic = 0x706d7231; // "pmr1"

struct Header {
    std::uint32_t magic;
    std::uint32_t ordinal;
    std::uint32_t kind;
    std::uint32_t index;
};

void check(int rc, const char* call) {
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING] = {};
        int length = 0;
        MPI_Error_string(rc, text, &length);
        raise<BootstrapError>(std::string(call) + " failed: " + text, "connection set-up",
                              "pmr needs a working MPI while connections and windows are created "
                              "and first used.");
    }
}

// Process-wide state of the set-up traffic. Guarded by a mutex so that set-up from several threads
// (with MPI_THREAD_MULTIPLE) stays consistent.
struct PostOffice {
    // Communicators are told apart by a generation number, not by their handle: MPI reuses the
    // handle of a freed communicator, and a new communicator must start counting afresh.
    using OrdinalKey = std::tuple<std::uint64_t, int, int, int>; // generation, peer, tags
    using InboxKey =
        std::tuple<std::uint64_t, int, int, std::uint32_t, std::uint32_t, std::uint32_t>;

    struct Outgoing {
        MPI_Request request;
        std::unique_ptr<Blob> buffer;
    };

    std::mutex mutex;
    std::map<OrdinalKey, std::uint32_t> ordinals;
    std::map<InboxKey, Blob> inbox;
    std::vector<Outgoing> outgoing;
    std::atomic<std::size_t> in_flight{0}; ///< outgoing.size(), readable without the mutex
    std::uint64_t next_generation = 1;

    // Everything known about a communicator that is being freed.
    void forget(std::uint64_t generation) {
        auto drop = [generation](auto& table) {
            for (auto it = table.begin(); it != table.end();) {
                it = std::get<0>(it->first) == generation ? table.erase(it) : std::next(it);
            }
        };
        drop(ordinals);
        drop(inbox);
    }

    // Completed sends release their buffers; incomplete ones stay (small messages complete
    // eagerly).
    void collect_sends() {
        for (auto it = outgoing.begin(); it != outgoing.end();) {
            int done = 0;
            check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
            it = done != 0 ? outgoing.erase(it) : std::next(it);
        }
        in_flight.store(outgoing.size(), std::memory_order_relaxed);
    }

    // Moves every message that has arrived from (peer, tag) into the inbox.
    void collect_incoming(MPI_Comm comm, std::uint64_t generation, int peer, int tag) {
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
            Header h{};
            if (data.size() < sizeof h) {
                continue; // not ours: too short to carry a header
            }
            std::memcpy(&h, data.data(), sizeof h);
            if (h.magic != magic) {
                continue;
            }
            data.erase(data.begin(), data.begin() + sizeof h);
            inbox[{generation, peer, tag, h.ordinal, h.kind, h.index}] = std::move(data);
        }
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

} // namespace

bool mpi_active() noexcept {
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized != 0 && finalized == 0;
}

int max_user_tag() {
    return tag_base();
}

Channel::Channel(const Target& target)
    : comm_(target.comm()), generation_(generation_of(target.comm())), peer_(target.rank()),
      send_tag_(tag_base() + target.send_tag()), recv_tag_(tag_base() + target.recv_tag()) {
    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    ordinal_ = office.ordinals[{generation_, peer_, target.send_tag(), target.recv_tag()}]++;
}

void Channel::send(Kind kind, std::uint32_t index, const Blob& payload) {
    Header h{magic, ordinal_, static_cast<std::uint32_t>(kind), index};
    auto buffer = std::make_unique<Blob>(sizeof h + payload.size());
    std::memcpy(buffer->data(), &h, sizeof h);
    std::copy(payload.begin(), payload.end(), buffer->begin() + sizeof h);

    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    office.collect_sends();
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Isend(buffer->data(), static_cast<int>(buffer->size()), MPI_BYTE, peer_, send_tag_,
                    comm_, &request),
          "MPI_Isend");
    office.outgoing.push_back({request, std::move(buffer)});
    office.in_flight.store(office.outgoing.size(), std::memory_order_relaxed);
}

void progress_sends() noexcept {
    auto& office = post_office();
    if (office.in_flight.load(std::memory_order_relaxed) == 0 || !mpi_active()) {
        return;
    }
    std::unique_lock<std::mutex> lock(office.mutex, std::try_to_lock);
    if (!lock.owns_lock()) {
        return; // another thread is in the set-up code, which progresses them
    }
    try {
        office.collect_sends();
    } catch (const std::exception&) {
        // Reported by the set-up call that next needs MPI; the wait goes on until PMR_TIMEOUT.
    }
}

Blob Channel::receive(Kind kind, std::uint32_t index, const std::string& where) {
    auto& office = post_office();
    const PostOffice::InboxKey key{
        generation_, peer_, recv_tag_, ordinal_, static_cast<std::uint32_t>(kind), index};
    Backoff backoff;
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(office.mutex);
            office.collect_sends();
            office.collect_incoming(comm_, generation_, peer_, recv_tag_);
            auto it = office.inbox.find(key);
            if (it != office.inbox.end()) {
                Blob message = std::move(it->second);
                office.inbox.erase(it);
                return message;
            }
        }
        if (backoff.pause() && backoff.expired()) {
            raise<Timeout>("the peer did not create its side within PMR_TIMEOUT (" +
                               std::to_string(settings().timeout_seconds) + " s)",
                           where,
                           "Every connection needs a matching Connection on the peer "
                           "(Target(comm, me, recvTag, sendTag)) and every window a matching "
                           "window of the other kind, created in the same order.");
        }
    }
}

} // namespace pmr::detail::bootstrap
