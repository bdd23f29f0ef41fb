// SPDX-License-Identifier: MIT
#include "bootstrap/post_office.hpp"

#include "bootstrap/mpi_process.hpp"

#include "base/environment.hpp"
#include "base/names.hpp"

#include <pmr/settings.hpp>

#include <cstdlib>
#include <utility>

namespace pmr::detail::bootstrap {

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
    constexpr Named<Kind> names[] = {{Kind::hello, "connection"},
                                     {Kind::send_window, "send window"},
                                     {Kind::recv_window, "receive window"},
                                     {Kind::provider_hello, "provider hello"},
                                     {Kind::withdrawn, "withdrawal"}};
    // The names are string literals, so the view's data is terminated.
    return name_of(static_cast<Kind>(kind), names, "unknown").data();
}

PostOffice& post_office() {
    static auto* office = new PostOffice(); // never destroyed: MPI may be finalised by then
    return *office;
}

namespace {

// Called by MPI when a communicator pmr has used is freed (or at MPI_Finalize).
int forget_communicator(MPI_Comm /*comm*/, int /*keyval*/, void* value, void* /*extra*/) {
    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    office.forget(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(value)));
    return MPI_SUCCESS;
}

} // namespace

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

} // namespace pmr::detail::bootstrap
