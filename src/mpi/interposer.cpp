// SPDX-License-Identifier: MIT
// The interposer: start and finish, communicators, datatypes and the report's counts.
#include "mpi/interposer.hpp"

#include "mpi/pmpi.hpp"
#include "mpi/support.hpp"

#include <pmr/error.hpp>
#include <pmr/settings.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace pmr::mpi {

thread_local bool inside_pmr __attribute__((tls_model("initial-exec"))) = false;

const char* reason_name(Reason reason) noexcept {
    switch (reason) {
    case Reason::carried:
        return "carried by pmr";
    case Reason::few_repeats:
        return "too few repeats";
    case Reason::plain_receives:
        return "receiver posts plain receives (PMR_MPI=all carries them)";
    case Reason::wildcard:
        return "a wildcard receive could match the stream";
    case Reason::probe:
        return "MPI_Mprobe could match the stream";
    case Reason::unknown_comm:
        return "communicator made by a call pmr does not follow";
    case Reason::intercomm:
        return "intercommunicator";
    case Reason::self:
        return "message to self";
    case Reason::too_small:
        return "messages below PMR_MPI_MIN_BYTES";
    case Reason::too_large:
        return "messages above PMR_MPI_MAX_BYTES";
    case Reason::refused:
        return "the sender declined";
    case Reason::handed_back:
        return "carried, then sent back to MPI by a message larger than the slots or a "
               "synchronous send";
    case Reason::stream_limit:
        return "PMR_MPI_MAX_STREAMS streams carried already";
    case Reason::cancelled:
        return "the program cancelled a receive held by MPI";
    case Reason::datatype:
        return "datatype or operation pmr does not reduce";
    case Reason::disagreement:
        return "ranks disagreed";
    case Reason::count_:
        break;
    }
    return "?";
}

bool CollectiveKey::operator<(const CollectiveKey& o) const noexcept {
    if (kind != o.kind) {
        return kind < o.kind;
    }
    if (count != o.count) {
        return count < o.count;
    }
    if (type != o.type) {
        return std::less<>()(type, o.type);
    }
    if (op != o.op) {
        return std::less<>()(op, o.op);
    }
    return root < o.root;
}

Interposer& Interposer::get() noexcept {
    // Never destroyed: in use until MPI_Finalize, which may run during static destruction.
    static auto* instance = new Interposer(); // NOLINT(bugprone-unhandled-exception-at-new)
    return *instance;
}

// ---------------------------------------------------------------------------------------------
// Start and finish

void Interposer::start(int provided_thread_level) {
    // Read through pmr's registry of settings (docs/settings.md); a malformed value is an error
    // that names the variable, and then everything stays on MPI.
    try {
        const std::string mode = pmr::settings::choice("PMR_MPI").value_or("all");
        settings_.mode = mode == "off"          ? Mode::off
                         : mode == "persistent" ? Mode::persistent
                                                : Mode::all;
        settings_.repeats =
            static_cast<unsigned>(pmr::settings::integer("PMR_MPI_REPEATS").value_or(3));
        settings_.max_bytes =
            pmr::settings::size("PMR_MPI_MAX_BYTES").value_or(settings_.max_bytes);
        settings_.min_bytes =
            pmr::settings::size("PMR_MPI_MIN_BYTES").value_or(settings_.min_bytes);
        settings_.min_bytes_persistent = pmr::settings::size("PMR_MPI_MIN_BYTES_PERSISTENT")
                                             .value_or(settings_.min_bytes_persistent);
        settings_.slots =
            static_cast<unsigned>(pmr::settings::integer("PMR_MPI_SLOTS").value_or(2));
        settings_.max_streams =
            static_cast<unsigned>(pmr::settings::integer("PMR_MPI_MAX_STREAMS").value_or(64));
        settings_.report_level =
            static_cast<int>(pmr::settings::integer("PMR_MPI_REPORT").value_or(0));
        settings_.rd_bytes = pmr::settings::size("PMR_MPI_RD_BYTES").value_or(settings_.rd_bytes);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pmr-mpi: %s\n", e.what());
        settings_.mode = Mode::off;
        off_reason_ = "a malformed PMR_MPI_* setting";
    }
    settings_.report = settings_.report_level > 0;

    call(PMPI_Comm_rank)(MPI_COMM_WORLD, &world_rank_);
    call(PMPI_Comm_size)(MPI_COMM_WORLD, &world_size_);
    {
        MPI_Comm node = MPI_COMM_NULL;
        call(PMPI_Comm_split_type)(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        int local = 1;
        call(PMPI_Comm_size)(node, &local);
        call(PMPI_Comm_free)(&node);
        cpu_set_t cpus;
        CPU_ZERO(&cpus);
        const int available = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
        const long online = sysconf(_SC_NPROCESSORS_ONLN);
        spin_only = local <= std::max<long>(online, available) && local > 0;
    }
    if (settings_.mode == Mode::off && off_reason_.empty()) {
        off_reason_ = "PMR_MPI=off";
    } else if (provided_thread_level == MPI_THREAD_MULTIPLE) {
        off_reason_ = "MPI_THREAD_MULTIPLE (pmr-mpi carries single-threaded MPI use only)";
    }
    // The decision must be the same on every rank: the set-up below is collective.
    int off = off_reason_.empty() ? 0 : 1;
    int any_off = 0;
    call(PMPI_Allreduce)(&off, &any_off, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_off != 0 && off_reason_.empty()) {
        off_reason_ = "another rank runs with PMR_MPI=off or MPI_THREAD_MULTIPLE";
    }
    auto world = std::make_unique<Comm>();
    world->handle = MPI_COMM_WORLD;
    world->id = world_id;
    world->rank = world_rank_;
    world->size = world_size_;
    by_id_[world_id] = world.get();
    comms_[MPI_COMM_WORLD] = std::move(world);
    if (any_off != 0) {
        return;
    }
    call(PMPI_Comm_dup)(MPI_COMM_WORLD, &control_);
    call(PMPI_Irecv)(control_buffer_, 6, MPI_INT64_T, MPI_ANY_SOURCE, control_tag, control_,
                     &control_request_);
    try {
        world_ = std::make_unique<pmr::Communicator>(MPI_COMM_WORLD);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pmr-mpi: set-up failed, everything stays on MPI: %s\n", e.what());
        return;
    }
    enabled_ = true;
}

void Interposer::finish() {
    if (finished_) {
        return;
    }
    finished_ = true;
    if (enabled_) {
        // Sends that left the application's hands must reach their receivers before the windows
        // go: give them a bounded time (a receiver that never receives loses them, as with MPI).
        const double deadline = call(PMPI_Wtime)() + 10.0;
        unsigned spins = 0;
        try {
            while (!busy_streams_.empty() && call(PMPI_Wtime)() < deadline) {
                progress();
                relax(spins);
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "pmr-mpi: rank %d at MPI_Finalize: %s\n", world_rank_, e.what());
        }
    }
    write_report();
    if (!enabled_) {
        return;
    }
    call(PMPI_Barrier)(control_);
    // Control messages no one waited for any more (a proposal that met its sender's
    // MPI_Finalize): received and dropped, so that none is left unmatched in MPI.
    for (;;) {
        int flag = 0;
        call(PMPI_Test)(&control_request_, &flag, MPI_STATUS_IGNORE);
        if (flag == 0) {
            break;
        }
        call(PMPI_Irecv)(control_buffer_, 6, MPI_INT64_T, MPI_ANY_SOURCE, control_tag, control_,
                         &control_request_);
    }
    try {
        for (auto& entry : comms_) {
            entry.second->last_collective = nullptr;
            entry.second->collectives.clear();
            entry.second->out.clear();
            entry.second->in.clear();
            std::fill(std::begin(entry.second->recent_out), std::end(entry.second->recent_out),
                      Comm::Recent<OutStream>{});
            std::fill(std::begin(entry.second->recent_in), std::end(entry.second->recent_in),
                      Comm::Recent<InStream>{});
            entry.second->pcomm.reset();
        }
        for (auto& comm : freed_comms_) {
            comm->last_collective = nullptr;
            comm->collectives.clear();
            comm->out.clear();
            comm->in.clear();
            std::fill(std::begin(comm->recent_out), std::end(comm->recent_out),
                      Comm::Recent<OutStream>{});
            std::fill(std::begin(comm->recent_in), std::end(comm->recent_in),
                      Comm::Recent<InStream>{});
            comm->pcomm.reset();
        }
        connections_.clear();
        world_.reset();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pmr-mpi: rank %d while closing: %s\n", world_rank_, e.what());
    }
    for (auto& entry : ops_) {
        if (!entry.second->persistent) { // our shells; persistent requests are the program's
            MPI_Request shell = entry.first;
            call(PMPI_Request_free)(&shell);
        }
    }
    ops_.clear();
    free_ops_.clear();
    for (RecentOp& recent : recent_op_) {
        recent = {};
    }
    if (control_request_ != MPI_REQUEST_NULL) {
        call(PMPI_Cancel)(&control_request_);
        call(PMPI_Wait)(&control_request_, MPI_STATUS_IGNORE);
    }
    call(PMPI_Comm_free)(&control_);
    enabled_ = false;
}

// ---------------------------------------------------------------------------------------------
// Communicators

Comm* Interposer::find(MPI_Comm comm) noexcept {
    if (comm == last_comm_ && comm != MPI_COMM_NULL) {
        return last_comm_state_;
    }
    auto it = comms_.find(comm);
    if (it == comms_.end()) {
        return nullptr;
    }
    last_comm_ = comm;
    last_comm_state_ = it->second.get();
    return last_comm_state_;
}

void Interposer::comm_created(MPI_Comm parent, MPI_Comm child) {
    // Every member of the parent makes its children in the same order (MPI's rule for
    // collectives), so (parent, child number) names the child alike on all of its members
    // without a message. A child of a communicator we do not know stays unknown.
    Comm* p = find(parent);
    if (p == nullptr) {
        return;
    }
    const std::uint32_t number = ++p->children;
    if (child == MPI_COMM_NULL) {
        return;
    }
    auto c = std::make_unique<Comm>();
    c->handle = child;
    int inter = 0;
    call(PMPI_Comm_test_inter)(child, &inter);
    if (inter != 0) {
        c->unknown_reason = Reason::intercomm;
    } else if (p->id != 0) {
        c->id = mix(p->id, number);
    }
    call(PMPI_Comm_rank)(child, &c->rank);
    call(PMPI_Comm_size)(child, &c->size);
    if (c->id != 0) {
        by_id_[c->id] = c.get();
    }
    if (last_comm_ == child) {
        last_comm_ = MPI_COMM_NULL;
    }
    comms_[child] = std::move(c);
}

void Interposer::comm_freed(MPI_Comm comm) {
    auto it = comms_.find(comm);
    if (it == comms_.end()) {
        return;
    }
    // The handle may come back for another communicator; the streams stay until MPI_Finalize
    // (their peers may still be sending what the application received before freeing).
    if (last_comm_ == comm) {
        last_comm_ = MPI_COMM_NULL;
    }
    it->second->freed = true;
    if (it->second->id != 0) {
        by_id_.erase(it->second->id);
    }
    freed_comms_.push_back(std::move(it->second));
    comms_.erase(it);
}

bool Interposer::world_of(Comm& comm) {
    if (!comm.world.empty()) {
        return true;
    }
    MPI_Group group = MPI_GROUP_NULL;
    MPI_Group world = MPI_GROUP_NULL;
    call(PMPI_Comm_group)(comm.handle, &group);
    call(PMPI_Comm_group)(MPI_COMM_WORLD, &world);
    std::vector<int> ranks(static_cast<std::size_t>(comm.size));
    for (int i = 0; i < comm.size; ++i) {
        ranks[static_cast<std::size_t>(i)] = i;
    }
    comm.world.resize(ranks.size());
    call(PMPI_Group_translate_ranks)(group, comm.size, ranks.data(), world, comm.world.data());
    call(PMPI_Group_free)(&group);
    call(PMPI_Group_free)(&world);
    for (int w : comm.world) {
        if (w == MPI_UNDEFINED) { // a process from outside MPI_COMM_WORLD (spawned)
            comm.id = 0;
            return false;
        }
    }
    return true;
}

const TypeInfo& Interposer::type_info(MPI_Datatype type) {
    if (type == last_type_ && last_type_info_ != nullptr) {
        return *last_type_info_;
    }
    // Elements of an unordered_map keep their address when it grows.
    auto it = types_.find(type);
    if (it != types_.end()) {
        last_type_ = type;
        last_type_info_ = &it->second;
        return it->second;
    }
    TypeInfo info;
    call(PMPI_Type_size)(type, &info.size);
    MPI_Aint lb = 0;
    MPI_Aint extent = 0;
    MPI_Aint true_lb = 0;
    MPI_Aint true_extent = 0;
    call(PMPI_Type_get_extent)(type, &lb, &extent);
    call(PMPI_Type_get_true_extent)(type, &true_lb, &true_extent);
    // Contiguous when the elements follow each other without gaps: count elements are then
    // count * size bytes from buf + true_lb.
    info.contiguous = extent == info.size && true_extent == info.size;
    info.lb = true_lb;
    int integers = 0;
    int addresses = 0;
    int types = 0;
    int combiner = MPI_COMBINER_NAMED;
    call(PMPI_Type_get_envelope)(type, &integers, &addresses, &types, &combiner);
    info.named = combiner == MPI_COMBINER_NAMED;
    return types_.emplace(type, info).first->second;
}

void Interposer::type_freed(MPI_Datatype type) {
    if (type == last_type_) {
        last_type_info_ = nullptr;
    }
    types_.erase(type);
}

void Comm::taint(int source, int tag, Reason reason) {
    for (const Taint& t : taints) {
        if (t.source == source && t.tag == tag) {
            return;
        }
    }
    if (taints.size() >= 64) { // beyond that, everything
        taints.clear();
        source = MPI_ANY_SOURCE;
        tag = MPI_ANY_TAG;
    }
    taints.push_back({source, tag, reason});
    ++taint_count;
}

Reason Comm::tainted(int source, int tag) const noexcept {
    for (const Taint& t : taints) {
        if (overlaps(t.source, t.tag, source, tag)) {
            return t.reason;
        }
    }
    return Reason::carried;
}

std::uint64_t Interposer::carried_messages() const {
    std::uint64_t n = 0;
    auto add = [&n](const Comm& comm) {
        for (const auto& entry : comm.out) {
            n += entry.second->pmr_sent.messages;
        }
        for (const auto& entry : comm.in) {
            n += entry.second->pmr_received.messages;
        }
    };
    for (const auto& entry : comms_) {
        add(*entry.second);
    }
    for (const auto& comm : freed_comms_) {
        add(*comm);
    }
    return n;
}

} // namespace pmr::mpi
