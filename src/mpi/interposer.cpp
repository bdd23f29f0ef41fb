// SPDX-License-Identifier: MIT
// The interposer's state machine: communicators, streams, requests and progress.
#include "mpi/interposer.hpp"

#include "mpi/pmpi.hpp"

#include <pmr/error.hpp>
#include <pmr/settings.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <type_traits>

namespace pmr::mpi {

thread_local bool inside_pmr = false;

namespace {

constexpr int control_tag = 7;
constexpr std::size_t header_bytes = 8;
// The header of the round that hands a stream back to MPI (a message larger than its slots):
// every later message of the stream goes through MPI.
constexpr std::uint64_t back_to_mpi = ~std::uint64_t{0};
constexpr std::uint64_t world_id = 1;
// Streams followed per communicator and direction (carried or not).
constexpr std::size_t followed_streams = 4096;

enum Control : std::int64_t { propose_stream = 1, accept_stream = 2, refuse_stream = 3 };

std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept {
    // splitmix64 over the pair: child communicators get well-spread identifiers.
    std::uint64_t x = a * 0x9E3779B97F4A7C15ULL + b + 0x632BE59BD9B4E019ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

template <class Handle>
std::size_t recent_index(Handle handle, std::size_t size) noexcept {
    std::uint64_t x = 0;
    if constexpr (std::is_pointer_v<Handle>) {
        x = reinterpret_cast<std::uintptr_t>(handle) >> 4; // Open MPI: objects on the heap
    } else {
        x = static_cast<std::uint64_t>(static_cast<std::uint32_t>(handle)); // MPICH: integers
    }
    return static_cast<std::size_t>((x ^ (x >> 7) ^ (x >> 13)) % size);
}

bool overlaps(int source_a, int tag_a, int source_b, int tag_b) noexcept {
    const bool sources =
        source_a == MPI_ANY_SOURCE || source_b == MPI_ANY_SOURCE || source_a == source_b;
    const bool tags = tag_a == MPI_ANY_TAG || tag_b == MPI_ANY_TAG || tag_a == tag_b;
    return sources && tags;
}

// Whether every rank on this node has a CPU of its own: waits then spin and never yield, as MPI's
// do (a yield hands the core to whatever else is runnable, a time slice of milliseconds on a
// loaded machine); with more ranks than CPUs a spinning rank takes its peer's time slice, so waits
// yield at every look.
bool spin_only = false;

void relax(unsigned& spins) {
    if (spin_only) {
        ++spins;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return;
    }
    sched_yield();
}

/// The blocking form of a non-blocking call: `look(flag)` until it sets flag or fails.
template <class Look>
int block(Look&& look) {
    unsigned spins = 0;
    for (;;) {
        int flag = 0;
        const int rc = look(flag);
        if (rc != MPI_SUCCESS || flag != 0) {
            return rc;
        }
        relax(spins);
    }
}

} // namespace

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

// ---------------------------------------------------------------------------------------------
// Streams and their agreement

template <class Stream>
Stream* Interposer::stream_of(Comm& comm,
                              std::map<std::pair<int, int>, std::unique_ptr<Stream>>& streams,
                              Comm::Recent<Stream>* recent, int peer, int tag) {
    const auto mixed = static_cast<unsigned>(peer) * 0x9E3779B1U + static_cast<unsigned>(tag);
    Comm::Recent<Stream>& entry = recent[(mixed ^ (mixed >> 16)) % Comm::recent_size];
    if (entry.stream != nullptr && entry.peer == peer && entry.tag == tag) {
        return entry.stream;
    }
    auto key = std::make_pair(peer, tag);
    auto it = streams.find(key);
    Stream* found = nullptr;
    if (it != streams.end()) {
        found = it->second.get();
    } else {
        // A program that makes a new tag for every message (an iteration number, say) would
        // have the interposer follow ever more streams: past the limit, new ones are not
        // followed (their messages go straight to MPI, and a proposal for one is declined,
        // since its sender has not counted its messages).
        if (comm.id == 0 || peer == comm.rank || streams.size() >= followed_streams ||
            !world_of(comm)) {
            return nullptr;
        }
        auto s = std::make_unique<Stream>();
        s->comm = &comm;
        s->peer = peer;
        s->tag = tag;
        s->peer_world = comm.world[static_cast<std::size_t>(peer)];
        found = streams.emplace(key, std::move(s)).first->second.get();
    }
    entry = {peer, tag, found};
    return found;
}

OutStream* Interposer::out_stream(Comm& comm, int dest, int tag) {
    return stream_of(comm, comm.out, comm.recent_out, dest, tag);
}

InStream* Interposer::in_stream(Comm& comm, int source, int tag) {
    return stream_of(comm, comm.in, comm.recent_in, source, tag);
}

pmr::Connection& Interposer::connection(int world_peer) {
    auto& c = connections_[world_peer];
    if (!c) {
        c = std::make_unique<pmr::Connection>(pmr::Target(*world_, world_peer, 1, 1));
    }
    return *c;
}

void Interposer::propose(InStream& stream) {
    ++streams_in_;
    stream.state = InStream::State::proposing;
    ++stream.comm->open_streams;
    ++open_proposals_;
    // The windows exist before the sender hears of them, so that neither side's first use ever
    // waits inside pmr for the other's construction (a wait that could close a cycle through a
    // third process); they are first used once the sender has answered.
    std::size_t capacity = std::max<std::size_t>(stream.max_bytes, 64);
    capacity = (capacity + 63) & ~std::size_t{63};
    pmr::Connection& c = connection(stream.peer_world);
    stream.slots.reserve(settings_.slots);
    for (unsigned i = 0; i < settings_.slots; ++i) {
        stream.slots.emplace_back(c, capacity + header_bytes);
    }
    stream.capacity = capacity;
    stream.proposed_at = call(PMPI_Wtime)();
    const std::int64_t message[6] = {propose_stream,
                                     static_cast<std::int64_t>(stream.comm->id),
                                     stream.tag,
                                     static_cast<std::int64_t>(stream.claimed_mpi),
                                     static_cast<std::int64_t>(capacity),
                                     settings_.slots};
    call(PMPI_Send)(message, 6, MPI_INT64_T, stream.peer_world, control_tag, control_);
}

bool Interposer::worth_polling(const OutStream& stream, int count, MPI_Datatype type) {
    // Looking for control messages is an MPI call that progresses everything MPI has in flight:
    // made before a large send, it can start a rendezvous copy for the peer ahead of this
    // rank's own send and serialise what would overlap (measured: uncarried 256 KiB-1 MiB
    // exchanges took twice as long). So look only where a proposal can matter: before messages
    // small enough to be carried, for a stream's first 64 sends and then every 16th.
    if (static_cast<std::size_t>(count) * static_cast<std::size_t>(type_info(type).size) >
        settings_.max_bytes) {
        return false;
    }
    return stream.sent_mpi < 64 || stream.sent_mpi % 16 == 0;
}

void Interposer::poll_control() {
    if (!enabled_) {
        return;
    }
    for (;;) {
        int flag = 0;
        MPI_Status status;
        call(PMPI_Test)(&control_request_, &flag, &status);
        if (flag == 0) {
            return;
        }
        std::int64_t message[6];
        std::memcpy(message, control_buffer_, sizeof message);
        call(PMPI_Irecv)(control_buffer_, 6, MPI_INT64_T, MPI_ANY_SOURCE, control_tag, control_,
                         &control_request_);
        handle_control(message, status.MPI_SOURCE);
    }
}

void Interposer::handle_control(const std::int64_t* message, int from_world) {
    const auto id = static_cast<std::uint64_t>(message[1]);
    const int tag = static_cast<int>(message[2]);
    auto it = by_id_.find(id);
    Comm* comm = it == by_id_.end() ? nullptr : it->second;
    int peer = -1;
    if (comm != nullptr && world_of(*comm)) {
        auto w = std::find(comm->world.begin(), comm->world.end(), from_world);
        if (w != comm->world.end()) {
            peer = static_cast<int>(w - comm->world.begin());
        }
    }
    if (message[0] == propose_stream) {
        // We send this stream; its receiver wants it on pmr from its message `claimed` on and
        // has made its windows. Ours pair with them in creation order, so they are made even
        // to refuse (and then dropped unused, which frees both sides).
        const auto claimed = static_cast<std::uint64_t>(message[3]);
        const auto capacity = static_cast<std::size_t>(message[4]);
        const auto slots = static_cast<unsigned>(message[5]);
        pmr::Connection& c = connection(from_world);
        std::vector<pmr::SendWindow<std::byte>> windows;
        windows.reserve(slots);
        for (unsigned i = 0; i < slots; ++i) {
            windows.emplace_back(c, capacity + header_bytes);
        }
        OutStream* stream = comm != nullptr && peer >= 0 ? out_stream(*comm, peer, tag) : nullptr;
        if (stream == nullptr || stream->carried || stream->synchronous || cancel_seen_ ||
            streams_out_ >= settings_.max_streams) {
            const std::int64_t answer[6] = {
                refuse_stream, message[1], tag, static_cast<std::int64_t>(Reason::refused), 0, 0};
            call(PMPI_Send)(answer, 6, MPI_INT64_T, from_world, control_tag, control_);
            return;
        }
        ++streams_out_;
        stream->slots = std::move(windows);
        stream->busy.assign(slots, 0);
        stream->capacity = capacity;
        stream->switch_at = std::max(stream->sent_mpi, claimed);
        stream->carried = true;
        const std::int64_t answer[6] = {accept_stream,
                                        message[1],
                                        tag,
                                        static_cast<std::int64_t>(stream->switch_at),
                                        static_cast<std::int64_t>(capacity),
                                        slots};
        call(PMPI_Send)(answer, 6, MPI_INT64_T, from_world, control_tag, control_);
        return;
    }
    InStream* stream = nullptr;
    if (comm != nullptr && peer >= 0) {
        auto s = comm->in.find(std::make_pair(peer, tag));
        stream = s == comm->in.end() ? nullptr : s->second.get();
    }
    if (stream == nullptr || stream->state != InStream::State::proposing) {
        return; // cannot happen: we proposed it
    }
    --open_proposals_;
    if (message[0] == accept_stream) {
        accept(*stream, static_cast<std::uint64_t>(message[3]));
    } else {
        stream->slots.clear(); // never used: both sides' windows go
        --streams_in_;
        stream->state = InStream::State::refused;
        stream->reason = Reason::refused;
        --stream->comm->open_streams;
    }
}

void Interposer::accept(InStream& stream, std::uint64_t switch_at) {
    for (auto& slot : stream.slots) {
        slot.init(); // the sender made its windows before it answered: no wait here
        slot.post();
    }
    stream.full.assign(stream.slots.size(), 0);
    stream.switch_at = switch_at;
    stream.setup_seconds = call(PMPI_Wtime)() - stream.proposed_at;
    stream.state = InStream::State::carried;
    stream.reason = Reason::carried;
}

// ---------------------------------------------------------------------------------------------
// Sending

bool Interposer::slot_free(OutStream& stream, unsigned slot) {
    if (stream.busy[slot] != 0 && stream.slots[slot].test()) {
        stream.busy[slot] = 0;
    }
    return stream.busy[slot] == 0;
}

void Interposer::list_busy(OutStream& stream) {
    if (!stream.listed_busy) {
        stream.listed_busy = true;
        busy_streams_.push_back(&stream);
    }
}

bool Interposer::send_carried(OutStream& stream, const void* buf, int count, MPI_Datatype type) {
    const TypeInfo& info = type_info(type);
    std::size_t total = static_cast<std::size_t>(count) * static_cast<std::size_t>(info.size);
    const std::byte* source = static_cast<const std::byte*>(buf) + info.lb;
    std::vector<std::byte> packed;
    if (!info.contiguous) {
        int bound = 0;
        call(PMPI_Pack_size)(count, type, stream.comm->handle, &bound);
        packed.resize(static_cast<std::size_t>(bound));
        int position = 0;
        call(PMPI_Pack)(buf, count, type, packed.data(), bound, &position, stream.comm->handle);
        total = static_cast<std::size_t>(position);
        packed.resize(total);
        source = packed.data();
    }
    if (total > stream.capacity) {
        // Larger than the slots the receiver sized from the messages it had seen: hand the
        // stream back to MPI (in order, after what is queued), as MPI carries large messages
        // with one copy where this stream would cut them into slot-sized rounds.
        hand_back(stream);
        return false;
    }
    send_bytes(stream, source, total);
    return true;
}

void Interposer::synchronous_send(OutStream& stream) {
    stream.synchronous = true;
    if (on_pmr(stream)) {
        hand_back(stream);
    }
}

void Interposer::hand_back(OutStream& stream) {
    Held marker;
    marker.total = back_to_mpi;
    stream.pending.push_back(std::move(marker));
    flush(stream);
    if (!stream.pending.empty()) {
        list_busy(stream);
    }
    stream.handed_back = true;
}

void Interposer::send_bytes(OutStream& stream, const std::byte* source, std::size_t total) {
    ++stream.pmr_sent.messages;
    stream.pmr_sent.bytes += total;
    std::size_t reached = 0;
    if (stream.pending.empty()) {
        reached = put_chunks(stream, source, total, 0);
        if (total == 0 ? reached == 1 : reached == total) {
            return;
        }
    }
    // The receiver is behind by every slot: keep the message (or its rest) here, as MPI's eager
    // protocol keeps what its receiver has not asked for yet, and send it from progress().
    Held held;
    held.total = total;
    held.offset = total == 0 ? 0 : reached;
    held.data.assign(source, source + total);
    stream.pending.push_back(std::move(held));
    list_busy(stream);
}

std::size_t Interposer::put_chunks(OutStream& stream, const std::byte* source, std::size_t total,
                                   std::size_t offset) {
    // Sends the message's rounds from `offset` while slots are free; returns the offset reached
    // (for an empty message: 1 once its one round is out, else 0).
    do {
        const unsigned slot = stream.next;
        if (!slot_free(stream, slot)) {
            return offset;
        }
        auto& window = stream.slots[slot];
        window.init();
        const bool header_only = total == 0 || total == back_to_mpi;
        const std::size_t chunk = header_only ? 0 : std::min(stream.capacity, total - offset);
        const auto header = static_cast<std::uint64_t>(total);
        std::memcpy(window.data(), &header, header_bytes);
        if (chunk != 0) {
            std::memcpy(window.data() + header_bytes, source + offset, chunk);
        }
        window.post(header_bytes + chunk);
        if (!window.test()) {
            stream.busy[slot] = 1;
            list_busy(stream);
        }
        stream.next = slot + 1 == stream.slots.size() ? 0 : slot + 1;
        offset += chunk;
        if (header_only) {
            return 1;
        }
    } while (offset < total);
    return offset;
}

void Interposer::flush(OutStream& stream) {
    while (!stream.pending.empty()) {
        Held& held = stream.pending.front();
        const std::size_t reached = put_chunks(stream, held.data.data(), held.total, held.offset);
        const bool header_only = held.total == 0 || held.total == back_to_mpi;
        if (header_only ? reached == 0 : reached < held.total) {
            held.offset = reached;
            return;
        }
        stream.pending.pop_front();
    }
}

int Interposer::send(const void* buf, int count, MPI_Datatype type, int dest, int tag,
                     MPI_Comm comm, int mode) {
    Comm* c = find(comm);
    OutStream* s = c != nullptr && dest != MPI_PROC_NULL ? out_stream(*c, dest, tag) : nullptr;
    if (s != nullptr && mode == 1) {
        synchronous_send(*s);
    }
    if (s != nullptr && !on_pmr(*s) && worth_polling(*s, count, type)) {
        poll_control(); // a proposal for this stream may be waiting
    }
    if (s != nullptr && on_pmr(*s) && send_carried(*s, buf, count, type)) {
        return MPI_SUCCESS;
    }
    if (s != nullptr) {
        ++s->sent_mpi;
    }
    if (owes()) {
        // Carried traffic waits on this process: send without blocking and keep it moving.
        MPI_Request request = MPI_REQUEST_NULL;
        int rc = MPI_SUCCESS;
        switch (mode) {
        case 1:
            rc = PMPI_Issend(buf, count, type, dest, tag, comm, &request);
            break;
        case 2:
            rc = PMPI_Irsend(buf, count, type, dest, tag, comm, &request);
            break;
        case 3:
            rc = PMPI_Ibsend(buf, count, type, dest, tag, comm, &request);
            break;
        default:
            rc = PMPI_Isend(buf, count, type, dest, tag, comm, &request);
        }
        return rc != MPI_SUCCESS ? rc : wait_mpi(&request, MPI_STATUS_IGNORE);
    }
    switch (mode) {
    case 1:
        return PMPI_Ssend(buf, count, type, dest, tag, comm);
    case 2:
        return PMPI_Rsend(buf, count, type, dest, tag, comm);
    case 3:
        return PMPI_Bsend(buf, count, type, dest, tag, comm);
    default:
        return PMPI_Send(buf, count, type, dest, tag, comm);
    }
}

int Interposer::isend(const void* buf, int count, MPI_Datatype type, int dest, int tag,
                      MPI_Comm comm, int mode, MPI_Request* request) {
    Comm* c = find(comm);
    OutStream* s = c != nullptr && dest != MPI_PROC_NULL ? out_stream(*c, dest, tag) : nullptr;
    if (s != nullptr && mode == 1) {
        synchronous_send(*s);
    }
    if (s != nullptr && !on_pmr(*s) && worth_polling(*s, count, type)) {
        poll_control();
    }
    if (s != nullptr && on_pmr(*s) && send_carried(*s, buf, count, type)) {
        Op* op = make_op(Op::Kind::send, false, const_cast<void*>(buf), count, type, dest, tag, c);
        op->active = true;
        op->complete = true;
        *request = op->handle;
        return MPI_SUCCESS;
    }
    if (s != nullptr) {
        ++s->sent_mpi;
    }
    switch (mode) {
    case 1:
        return PMPI_Issend(buf, count, type, dest, tag, comm, request);
    case 2:
        return PMPI_Irsend(buf, count, type, dest, tag, comm, request);
    case 3:
        return PMPI_Ibsend(buf, count, type, dest, tag, comm, request);
    default:
        return PMPI_Isend(buf, count, type, dest, tag, comm, request);
    }
}

int Interposer::send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag,
                          MPI_Comm comm, int mode, MPI_Request* request) {
    int rc = MPI_SUCCESS;
    switch (mode) {
    case 1:
        rc = PMPI_Ssend_init(buf, count, type, dest, tag, comm, request);
        break;
    case 2:
        rc = PMPI_Rsend_init(buf, count, type, dest, tag, comm, request);
        break;
    case 3:
        rc = PMPI_Bsend_init(buf, count, type, dest, tag, comm, request);
        break;
    default:
        rc = PMPI_Send_init(buf, count, type, dest, tag, comm, request);
    }
    Comm* c = find(comm);
    if (rc != MPI_SUCCESS || c == nullptr || dest == MPI_PROC_NULL) {
        return rc;
    }
    auto op = std::make_unique<Op>();
    op->kind = Op::Kind::send;
    op->persistent = true;
    op->handle = *request;
    op->buf = const_cast<void*>(buf);
    op->count = count;
    op->type = type;
    op->peer = dest;
    op->tag = tag;
    op->comm = c;
    op->synchronous = mode == 1;
    hold_type(*op);
    recent_op_[recent_index(*request, recent_ops)] = {};
    op_filter_[recent_index(*request, op_filter_bits)] = true;
    ops_[*request] = std::move(op);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// Receiving

Op* Interposer::make_op(Op::Kind kind, bool persistent, void* buf, int count, MPI_Datatype type,
                        int peer, int tag, Comm* comm) {
    Op* op = nullptr;
    if (!free_ops_.empty()) {
        // Operations and their handles are kept and reused: a plain receive or send in the
        // steady state allocates nothing and makes no MPI call.
        op = free_ops_.back();
        free_ops_.pop_back();
        // Every field is set below or here (cheaper than assigning a whole fresh Op).
        op->active = false;
        op->complete = false;
        op->on_mpi = false;
        op->freed = false;
        op->cancelled = false;
        op->in_queue = false;
        op->inner = MPI_REQUEST_NULL;
        op->error = MPI_SUCCESS;
        op->got = 0;
        op->total = 0;
        op->staging.clear();
        op->collective = nullptr;
        op->stream = nullptr;
        op->own_type = false;
    } else {
        auto fresh = std::make_unique<Op>();
        // A real, never started persistent request: a handle every MPI call accepts (also
        // through the Fortran bindings), which stands for an operation the interposer carries.
        call(PMPI_Send_init)(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, &fresh->handle);
        op = fresh.get();
        recent_op_[recent_index(op->handle, recent_ops)] = {};
        op_filter_[recent_index(op->handle, op_filter_bits)] = true;
        ops_[op->handle] = std::move(fresh);
    }
    op->kind = kind;
    op->persistent = persistent;
    op->buf = buf;
    op->count = count;
    op->type = type;
    op->peer = peer;
    op->tag = tag;
    op->comm = comm;
    if (kind == Op::Kind::recv) {
        hold_type(*op);
    }
    return op;
}

void Interposer::hold_type(Op& op) {
    if (op.type == MPI_DATATYPE_NULL || type_info(op.type).named) {
        return;
    }
    MPI_Datatype copy = MPI_DATATYPE_NULL;
    call(PMPI_Type_dup)(op.type, &copy);
    op.type = copy;
    op.own_type = true;
}

void Interposer::drop_type(Op& op) {
    if (op.own_type) {
        type_freed(op.type);
        call(PMPI_Type_free)(&op.type);
        op.own_type = false;
    }
}

void Interposer::release(Op& op) {
    drop_type(op);
    op.active = false;
    op.complete = false;
    op.comm = nullptr;
    free_ops_.push_back(&op);
}

bool Interposer::open_stream_matches(const Comm& comm, int source, int tag) const {
    if (comm.open_streams == 0) {
        return false;
    }
    for (const auto& entry : comm.in) {
        const InStream& s = *entry.second;
        if ((s.state == InStream::State::proposing || s.state == InStream::State::carried) &&
            overlaps(source, tag, s.peer, s.tag)) {
            return true;
        }
    }
    return false;
}

bool Interposer::defer_needed(const Comm& comm, int source, int tag) const {
    for (const Op* op : comm.deferred) {
        if (overlaps(op->peer, op->tag, source, tag)) {
            return true;
        }
    }
    return false;
}

void Interposer::activate_recv(Op& op) {
    op.active = true;
    op.complete = false;
    op.on_mpi = false;
    op.cancelled = false;
    op.error = MPI_SUCCESS;
    op.got = 0;
    op.total = 0;
    Comm* c = op.comm;
    bool defer = false;
    if (c != nullptr && op.peer != MPI_PROC_NULL) {
        if (op.peer == MPI_ANY_SOURCE || op.tag == MPI_ANY_TAG) {
            c->taint(op.peer, op.tag, Reason::wildcard);
            // Deferred only where a proposed or carried stream (or an earlier deferred receive)
            // could match it; otherwise MPI holds it, and progresses it inside any MPI call.
            defer = defer_needed(*c, op.peer, op.tag) || open_stream_matches(*c, op.peer, op.tag);
        } else if (InStream* s = in_stream(*c, op.peer, op.tag)) {
            op.stream = s;
            if (s->state == InStream::State::carried && c->deferred.empty() &&
                s->claimed_mpi >= s->switch_at && s->partial == nullptr &&
                take_from_slots(*s, op)) {
                // The steady state of a carried stream: its message is there already.
                complete_op(op);
                return;
            }
            if (s->state == InStream::State::proposing || s->state == InStream::State::carried ||
                defer_needed(*c, op.peer, op.tag)) {
                defer = true;
            } else if (s->state == InStream::State::mpi) {
                const TypeInfo& info = type_info(op.type);
                const auto bytes =
                    static_cast<std::size_t>(op.count) * static_cast<std::size_t>(info.size);
                s->max_bytes = std::max(s->max_bytes, bytes);
                if (op.persistent || settings_.mode == Mode::all) {
                    ++s->repeats;
                } else {
                    s->reason = Reason::plain_receives;
                }
                if (const Reason r = c->tainted(op.peer, op.tag); r != Reason::carried) {
                    s->reason = r;
                } else if (cancel_seen_) {
                    s->reason = Reason::cancelled;
                } else if (streams_in_ >= settings_.max_streams) {
                    s->reason = Reason::stream_limit;
                } else if (s->max_bytes > settings_.max_bytes) {
                    s->reason = Reason::too_large;
                } else if (s->max_bytes < settings_.min_bytes) {
                    s->reason = Reason::too_small;
                } else if (s->repeats >= settings_.repeats) {
                    propose(*s);
                    defer = true;
                }
                if (!defer) {
                    ++s->claimed_mpi;
                }
            } else {
                ++s->claimed_mpi; // refused: MPI's for good
            }
        } else if (defer_needed(*c, op.peer, op.tag)) {
            defer = true;
        }
    }
    if (defer) {
        op.in_queue = true;
        if (c->deferred.empty()) {
            deferring_comms_.push_back(c);
        }
        c->deferred.push_back(&op);
        progress_deferred(*c);
        return;
    }
    op.on_mpi = true;
    if (op.persistent) {
        PMPI_Start(&op.handle);
    } else {
        PMPI_Irecv(op.buf, op.count, op.type, op.peer, op.tag, op.comm->handle, &op.inner);
    }
}

int Interposer::irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                      MPI_Request* request) {
    Comm* c = find(comm);
    if (c == nullptr || source == MPI_PROC_NULL) {
        return PMPI_Irecv(buf, count, type, source, tag, comm, request);
    }
    // The common case: a stream on MPI with nothing deferred ahead of it goes straight to MPI
    // (counted), without an Op.
    if (source != MPI_ANY_SOURCE && tag != MPI_ANY_TAG && c->deferred.empty()) {
        InStream* s = in_stream(*c, source, tag);
        if (s == nullptr) {
            return PMPI_Irecv(buf, count, type, source, tag, comm, request);
        }
        // A receive that cannot make its stream carried goes straight to MPI: below
        // PMR_MPI_MIN_BYTES (and the stream's largest receive too) MPI's own small-message path
        // is as fast as a carried stream, so the stream only keeps its count here.
        const auto bytes =
            static_cast<std::size_t>(count) * static_cast<std::size_t>(type_info(type).size);
        const bool small = bytes < settings_.min_bytes && s->max_bytes < settings_.min_bytes;
        if (small && s->state == InStream::State::mpi) {
            s->max_bytes = std::max(s->max_bytes, bytes);
            s->reason = Reason::too_small;
        }
        const bool may_propose =
            settings_.mode == Mode::all && s->state == InStream::State::mpi && !small;
        if (s->state == InStream::State::refused ||
            (s->state == InStream::State::mpi && !may_propose)) {
            if (settings_.mode != Mode::all) {
                s->reason = Reason::plain_receives;
            }
            ++s->claimed_mpi;
            return PMPI_Irecv(buf, count, type, source, tag, comm, request);
        }
    }
    Op* op = make_op(Op::Kind::recv, false, buf, count, type, source, tag, c);
    *request = op->handle;
    activate_recv(*op);
    if (op->on_mpi) {
        // Straight to MPI after all: hand the application MPI's own request.
        *request = op->inner;
        release(*op);
    }
    return MPI_SUCCESS;
}

int Interposer::recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                     MPI_Status* status) {
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = irecv(buf, count, type, source, tag, comm, &request);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    return wait(&request, status);
}

int Interposer::recv_init(void* buf, int count, MPI_Datatype type, int source, int tag,
                          MPI_Comm comm, MPI_Request* request) {
    const int rc = PMPI_Recv_init(buf, count, type, source, tag, comm, request);
    Comm* c = find(comm);
    if (rc != MPI_SUCCESS || c == nullptr || source == MPI_PROC_NULL) {
        return rc;
    }
    auto op = std::make_unique<Op>();
    op->kind = Op::Kind::recv;
    op->persistent = true;
    op->handle = *request;
    op->buf = buf;
    op->count = count;
    op->type = type;
    op->peer = source;
    op->tag = tag;
    op->comm = c;
    hold_type(*op);
    recent_op_[recent_index(*request, recent_ops)] = {};
    op_filter_[recent_index(*request, op_filter_bits)] = true;
    ops_[*request] = std::move(op);
    return rc;
}

bool Interposer::take_from_mpi(Op& op, int source, int tag) {
    int flag = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    call(PMPI_Improbe)(source, tag, op.comm->handle, &flag, &message, &status);
    if (flag == 0) {
        return false;
    }
    if (InStream* s = in_stream(*op.comm, status.MPI_SOURCE, status.MPI_TAG)) {
        ++s->claimed_mpi;
    }
    op.error = PMPI_Mrecv(op.buf, op.count, op.type, &message, &op.status);
    return true;
}

bool Interposer::take_from_slots(InStream& stream, Op& op) {
    // Most calls find nothing yet (a wait polls here): look before anything else.
    if (stream.full[stream.next] == 0) {
        if (!stream.slots[stream.next].test()) {
            return false;
        }
        stream.full[stream.next] = 1;
    }
    const TypeInfo& info = type_info(op.type);
    const std::size_t room =
        static_cast<std::size_t>(op.count) * static_cast<std::size_t>(info.size);
    for (;;) {
        const unsigned slot = stream.next;
        auto& window = stream.slots[slot];
        if (stream.full[slot] == 0) {
            if (!window.test()) {
                return false;
            }
            stream.full[slot] = 1;
        }
        const std::size_t bytes = window.received_bytes();
        std::uint64_t total = 0;
        std::memcpy(&total, window.data(), header_bytes);
        if (total == back_to_mpi) {
            // The sender handed the stream back to MPI: the rest of it arrives there.
            stream.full[slot] = 0;
            stream.state = InStream::State::refused;
            stream.reason = Reason::handed_back;
            --stream.comm->open_streams;
            return false;
        }
        if (op.got == 0 && stream.partial != &op) {
            op.total = static_cast<std::size_t>(total);
            if (!info.contiguous) {
                op.staging.resize(op.total);
            }
        }
        const std::size_t chunk = bytes - header_bytes;
        const std::byte* payload = window.data() + header_bytes;
        if (info.contiguous) {
            if (op.got < room) {
                std::memcpy(static_cast<std::byte*>(op.buf) + info.lb + op.got, payload,
                            std::min(chunk, room - op.got));
            }
        } else {
            std::memcpy(op.staging.data() + op.got, payload, chunk);
        }
        op.got += chunk;
        stream.full[slot] = 0;
        window.init();
        window.post();
        stream.next = slot + 1 == stream.slots.size() ? 0 : slot + 1;
        if (op.got < op.total) {
            stream.partial = &op;
            continue;
        }
        stream.partial = nullptr;
        break;
    }
    std::size_t delivered = std::min(op.total, room);
    if (!info.contiguous) {
        int position = 0;
        const int rc = PMPI_Unpack(op.staging.data(), static_cast<int>(op.total), &position, op.buf,
                                   op.count, op.type, op.comm->handle);
        delivered = static_cast<std::size_t>(position);
        if (rc != MPI_SUCCESS) {
            op.error = MPI_ERR_TRUNCATE;
        }
        op.staging.clear();
    }
    if (op.total > room) {
        op.error = MPI_ERR_TRUNCATE;
    }
    set_status(&op.status, stream.peer, stream.tag, delivered, false, op.error);
    ++stream.pmr_received.messages;
    stream.pmr_received.bytes += op.total;
    return true;
}

bool Interposer::try_match(Op& op) {
    Comm& comm = *op.comm;
    if (op.peer == MPI_ANY_SOURCE || op.tag == MPI_ANY_TAG) {
        for (auto& entry : comm.in) {
            InStream& s = *entry.second;
            if (s.state == InStream::State::carried && s.claimed_mpi >= s.switch_at &&
                overlaps(op.peer, op.tag, s.peer, s.tag) &&
                (s.partial == nullptr || s.partial == &op)) {
                if (take_from_slots(s, op)) {
                    return true;
                }
                if (s.partial == &op) {
                    return false;
                }
                if (s.state != InStream::State::carried) {
                    break; // handed back to MPI: look there (the map changed nothing else)
                }
            }
        }
        return take_from_mpi(op, op.peer, op.tag);
    }
    InStream* s = op.stream != nullptr ? op.stream : in_stream(comm, op.peer, op.tag);
    if (s != nullptr && s->state == InStream::State::carried && s->claimed_mpi >= s->switch_at) {
        if (s->partial != nullptr && s->partial != &op) {
            return false;
        }
        if (take_from_slots(*s, op)) {
            return true;
        }
        if (s->state == InStream::State::carried) {
            return false;
        }
    }
    return take_from_mpi(op, op.peer, op.tag);
}

void Interposer::progress_deferred(Comm& comm) {
    // Serve receives in posting order: one that finds nothing keeps every later receive that
    // could match the same messages waiting, as MPI's matching would.
    struct Pattern {
        int source;
        int tag;
    };
    Pattern blocked[16];
    std::size_t nblocked = 0;
    bool all_blocked = false;
    for (auto it = comm.deferred.begin(); it != comm.deferred.end();) {
        Op& op = **it;
        bool skip = all_blocked;
        for (std::size_t i = 0; i < nblocked && !skip; ++i) {
            skip = overlaps(blocked[i].source, blocked[i].tag, op.peer, op.tag);
        }
        if (!skip && try_match(op)) {
            op.in_queue = false;
            if (it == comm.deferred.begin()) {
                comm.deferred.pop_front();
                it = comm.deferred.begin();
            } else {
                it = comm.deferred.erase(it);
            }
            complete_op(op);
            continue;
        }
        if (nblocked < 16) {
            blocked[nblocked++] = {op.peer, op.tag};
        } else {
            all_blocked = true;
        }
        ++it;
    }
    if (comm.deferred.empty()) {
        auto d = std::find(deferring_comms_.begin(), deferring_comms_.end(), &comm);
        if (d != deferring_comms_.end()) {
            deferring_comms_.erase(d);
        }
    }
}

void Interposer::complete_op(Op& op) {
    op.complete = true;
    if (op.freed) {
        retire(op);
    }
}

void Interposer::progress() {
    for (std::size_t i = 0; i < collective_ops_.size();) {
        Op& op = *collective_ops_[i];
        if (op.collective->core.test()) {
            std::memcpy(op.buf, op.collective->core.data(), op.collective->bytes);
            ++op.collective->carried.messages;
            op.collective->carried.bytes += op.collective->bytes;
            collective_ops_[i] = collective_ops_.back();
            collective_ops_.pop_back();
            set_status(&op.status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, false, MPI_SUCCESS);
            complete_op(op);
        } else {
            ++i;
        }
    }
    for (std::size_t i = 0; i < busy_streams_.size();) {
        OutStream& s = *busy_streams_[i];
        flush(s);
        bool any = !s.pending.empty();
        for (std::size_t k = 0; k < s.slots.size(); ++k) {
            if (s.busy[k] != 0) {
                if (s.slots[k].test()) {
                    s.busy[k] = 0;
                } else {
                    any = true;
                }
            }
        }
        if (!any) {
            s.listed_busy = false;
            busy_streams_[i] = busy_streams_.back();
            busy_streams_.pop_back();
        } else {
            ++i;
        }
    }
    if (open_proposals_ != 0) {
        poll_control();
    }
    for (std::size_t i = 0; i < deferring_comms_.size();) {
        Comm* c = deferring_comms_[i];
        progress_deferred(*c);
        if (i < deferring_comms_.size() && deferring_comms_[i] == c) {
            ++i;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Requests

Op* Interposer::op_of(MPI_Request handle) noexcept {
    if (ops_.empty() || handle == MPI_REQUEST_NULL) {
        return nullptr;
    }
    RecentOp& recent = recent_op_[recent_index(handle, recent_ops)];
    if (recent.handle == handle && recent.op != nullptr) {
        return recent.op;
    }
    if (!op_filter_[recent_index(handle, op_filter_bits)]) {
        return nullptr;
    }
    auto it = ops_.find(handle);
    if (it == ops_.end()) {
        return nullptr;
    }
    recent = {handle, it->second.get()};
    return recent.op;
}

void Interposer::forget_op(MPI_Request handle) noexcept {
    RecentOp& recent = recent_op_[recent_index(handle, recent_ops)];
    if (recent.handle == handle) {
        recent = {};
    }
    ops_.erase(handle);
}

bool Interposer::own_pending(int count, const MPI_Request* requests) noexcept {
    if (ops_.empty()) {
        return false;
    }
    for (int i = 0; i < count; ++i) {
        if (op_of(requests[i]) != nullptr) {
            return true;
        }
    }
    return false;
}

void Interposer::retire(Op& op) {
    // A completed operation the application no longer holds (freed, or a finished plain one).
    if (op.persistent) {
        MPI_Request h = op.handle;
        drop_type(op);
        forget_op(op.handle);
        PMPI_Request_free(&h);
    } else {
        release(op);
    }
}

int Interposer::start(MPI_Request* request) {
    Op* op = op_of(*request);
    if (op == nullptr) {
        return PMPI_Start(request);
    }
    if (op->kind == Op::Kind::recv) {
        activate_recv(*op);
        return MPI_SUCCESS;
    }
    op->active = true;
    op->complete = false;
    op->on_mpi = false;
    Comm* c = op->comm;
    OutStream* s = out_stream(*c, op->peer, op->tag);
    if (s != nullptr && op->synchronous) {
        synchronous_send(*s);
    }
    if (s != nullptr && !on_pmr(*s) && worth_polling(*s, op->count, op->type)) {
        poll_control();
    }
    if (s != nullptr && on_pmr(*s) && send_carried(*s, op->buf, op->count, op->type)) {
        op->complete = true;
        set_status(&op->status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, false, MPI_SUCCESS);
        return MPI_SUCCESS;
    }
    if (s != nullptr) {
        ++s->sent_mpi;
    }
    op->on_mpi = true;
    return PMPI_Start(request);
}

int Interposer::startall(int count, MPI_Request* requests) {
    if (!own_pending(count, requests)) {
        return PMPI_Startall(count, requests);
    }
    for (int i = 0; i < count; ++i) {
        const int rc = start(&requests[i]);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
    }
    return MPI_SUCCESS;
}

int Interposer::finish_request(MPI_Request* request, MPI_Status* status) {
    // The operation has completed: hand its status out and reset or release the request.
    Op* op = op_of(*request);
    const int error = op->error;
    if (status != MPI_STATUS_IGNORE) {
        if (op->kind != Op::Kind::recv) {
            set_status(status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, false, MPI_SUCCESS);
        } else {
            *status = op->status;
        }
    }
    op->active = false;
    op->complete = false;
    if (!op->persistent) {
        release(*op);
        *request = MPI_REQUEST_NULL;
    }
    return error;
}

int Interposer::wait_mpi(MPI_Request* request, MPI_Status* status) {
    int flag = 0;
    unsigned spins = 0;
    for (;;) {
        const int rc = PMPI_Test(request, &flag, status);
        if (rc != MPI_SUCCESS || flag != 0) {
            return rc;
        }
        progress();
        relax(spins);
    }
}

void Interposer::wait_until(const std::function<bool()>& done) {
    unsigned spins = 0;
    for (;;) {
        progress();
        if (done()) {
            return;
        }
        relax(spins);
    }
}

int Interposer::test(MPI_Request* request, int* flag, MPI_Status* status) {
    Op* op = op_of(*request);
    if (op == nullptr) {
        if (owes()) {
            progress();
        }
        return PMPI_Test(request, flag, status);
    }
    if (op->on_mpi || !op->active) {
        const int rc = PMPI_Test(request, flag, status);
        if (*flag != 0) {
            op->active = false;
            op->on_mpi = false;
        }
        return rc;
    }
    progress();
    *flag = op->complete ? 1 : 0;
    if (!op->complete) {
        return MPI_SUCCESS;
    }
    const int rc = finish_request(request, status);
    if (rc != MPI_SUCCESS && op->comm != nullptr) {
        return call(PMPI_Comm_call_errhandler)(op->comm->handle, rc), rc;
    }
    return rc;
}

int Interposer::wait(MPI_Request* request, MPI_Status* status) {
    Op* op = op_of(*request);
    if (op == nullptr || op->on_mpi || !op->active) {
        if (op != nullptr) {
            op->active = false;
            op->on_mpi = false;
        }
        if (!owes()) {
            return PMPI_Wait(request, status);
        }
        // Carried traffic must move while MPI's request completes: poll both.
        return wait_mpi(request, status);
    }
    wait_until([op] { return op->complete; });
    Comm* comm = op->comm;
    const int rc = finish_request(request, status);
    if (rc != MPI_SUCCESS && comm != nullptr) {
        call(PMPI_Comm_call_errhandler)(comm->handle, rc);
    }
    return rc;
}

int Interposer::testall(int count, MPI_Request* requests, int* flag, MPI_Status* statuses) {
    if (!own_pending(count, requests)) {
        if (owes()) {
            progress();
        }
        return PMPI_Testall(count, requests, flag, statuses);
    }
    progress();
    // All or nothing: look without completing, then complete every one.
    for (int i = 0; i < count; ++i) {
        Op* op = op_of(requests[i]);
        if (op != nullptr && !op->on_mpi && op->active) {
            if (!op->complete) {
                *flag = 0;
                return MPI_SUCCESS;
            }
        } else if (requests[i] != MPI_REQUEST_NULL) {
            int done = 0;
            PMPI_Request_get_status(requests[i], &done, MPI_STATUS_IGNORE);
            if (done == 0) {
                *flag = 0;
                return MPI_SUCCESS;
            }
        }
    }
    *flag = 1;
    return waitall(count, requests, statuses);
}

int Interposer::waitall(int count, MPI_Request* requests, MPI_Status* statuses) {
    // The operations behind the handles, found once (a halo's few requests on the stack).
    constexpr int on_stack = 32;
    Op* few[on_stack];
    unsigned char few_done[on_stack];
    std::vector<Op*> many;
    std::vector<unsigned char> many_done;
    Op** ops = few;
    unsigned char* done = few_done;
    if (count > on_stack) {
        many.resize(static_cast<std::size_t>(count));
        many_done.resize(static_cast<std::size_t>(count));
        ops = many.data();
        done = many_done.data();
    }
    bool carried = false; // an operation of ours in flight (not handed to MPI)
    for (int i = 0; i < count; ++i) {
        ops[i] = op_of(requests[i]);
        carried = carried || (ops[i] != nullptr && !ops[i]->on_mpi && ops[i]->active);
        done[i] = 0;
    }
    if (!carried && !owes()) {
        // Everything is MPI's (persistent requests the interposer follows included): MPI's own
        // wait, then the followed ones are inactive again.
        const int rc = PMPI_Waitall(count, requests, statuses);
        for (int i = 0; i < count; ++i) {
            if (ops[i] != nullptr) {
                ops[i]->active = false;
                ops[i]->on_mpi = false;
            }
        }
        return rc;
    }
    int errors = 0;
    Comm* failed = nullptr; // the communicator of a carried receive that failed (truncation)
    int left = count;
    unsigned spins = 0;
    for (;;) {
        for (int i = 0; i < count; ++i) {
            if (done[i] != 0) {
                continue;
            }
            MPI_Status* st = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
            Op* op = ops[i];
            int finished = 0;
            int rc = MPI_SUCCESS;
            if (op != nullptr && !op->on_mpi && op->active) {
                if (op->complete) {
                    finished = 1;
                    Comm* comm = op->comm;
                    rc = finish_request(&requests[i], st);
                    if (rc != MPI_SUCCESS && failed == nullptr) {
                        failed = comm;
                    }
                }
            } else {
                rc = PMPI_Test(&requests[i], &finished, st);
                if (finished != 0 && op != nullptr) {
                    op->active = false;
                    op->on_mpi = false;
                }
            }
            if (finished != 0) {
                done[i] = 1;
                --left;
                if (rc != MPI_SUCCESS) {
                    ++errors;
                    if (st != MPI_STATUS_IGNORE) {
                        st->MPI_ERROR = rc;
                    }
                }
            }
        }
        if (left == 0) {
            break;
        }
        progress();
        relax(spins);
    }
    if (errors == 0) {
        return MPI_SUCCESS;
    }
    if (failed != nullptr) {
        // As MPI would: the error handler of the request's communicator decides.
        call(PMPI_Comm_call_errhandler)(failed->handle, MPI_ERR_IN_STATUS);
    }
    return MPI_ERR_IN_STATUS;
}

int Interposer::waitany(int count, MPI_Request* requests, int* index, MPI_Status* status) {
    if (!own_pending(count, requests) && !owes()) {
        return PMPI_Waitany(count, requests, index, status);
    }
    return block([&](int& flag) { return testany(count, requests, index, &flag, status); });
}

Interposer::Look Interposer::look(MPI_Request* request, MPI_Status* status) {
    Look l;
    Op* op = op_of(*request);
    if (op != nullptr && !op->on_mpi) {
        if (!op->active) {
            return l;
        }
        l.active = true;
        if (op->complete) {
            l.finished = true;
            l.comm = op->comm;
            l.rc = finish_request(request, status);
        }
        return l;
    }
    // Inactive persistent requests count as not active, as in MPI.
    if (*request == MPI_REQUEST_NULL || (op != nullptr && !op->active)) {
        return l;
    }
    l.active = true;
    int done = 0;
    PMPI_Request_get_status(*request, &done, MPI_STATUS_IGNORE);
    if (done != 0) {
        int finished = 0;
        l.rc = PMPI_Test(request, &finished, status);
        l.finished = finished != 0;
        if (op != nullptr) {
            op->active = false;
        }
    }
    return l;
}

int Interposer::testany(int count, MPI_Request* requests, int* index, int* flag,
                        MPI_Status* status) {
    if (!own_pending(count, requests)) {
        if (owes()) {
            progress();
        }
        return PMPI_Testany(count, requests, index, flag, status);
    }
    progress();
    bool any_active = false;
    for (int i = 0; i < count; ++i) {
        const Look l = look(&requests[i], status);
        any_active = any_active || l.active;
        if (l.finished) {
            if (l.rc != MPI_SUCCESS && l.comm != nullptr) {
                call(PMPI_Comm_call_errhandler)(l.comm->handle, l.rc);
            }
            *index = i;
            *flag = 1;
            return l.rc;
        }
    }
    *flag = any_active ? 0 : 1;
    *index = MPI_UNDEFINED;
    if (!any_active && status != MPI_STATUS_IGNORE) {
        set_status(status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, false, MPI_SUCCESS);
    }
    return MPI_SUCCESS;
}

int Interposer::waitsome(int incount, MPI_Request* requests, int* outcount, int* indices,
                         MPI_Status* statuses) {
    if (!own_pending(incount, requests) && !owes()) {
        return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    }
    return block([&](int& flag) {
        const int rc = testsome(incount, requests, outcount, indices, statuses);
        flag = *outcount != 0 ? 1 : 0;
        return rc;
    });
}

int Interposer::testsome(int incount, MPI_Request* requests, int* outcount, int* indices,
                         MPI_Status* statuses) {
    if (!own_pending(incount, requests)) {
        if (owes()) {
            progress();
        }
        return PMPI_Testsome(incount, requests, outcount, indices, statuses);
    }
    progress();
    int n = 0;
    bool any_active = false;
    int errors = 0;
    Comm* failed = nullptr;
    for (int i = 0; i < incount; ++i) {
        MPI_Status* st = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[n];
        const Look l = look(&requests[i], st);
        any_active = any_active || l.active;
        if (l.finished) {
            indices[n++] = i;
            if (l.rc != MPI_SUCCESS) {
                ++errors;
                if (st != MPI_STATUS_IGNORE) {
                    st->MPI_ERROR = l.rc;
                }
                if (failed == nullptr) {
                    failed = l.comm;
                }
            }
        }
    }
    *outcount = any_active ? n : MPI_UNDEFINED;
    if (errors == 0) {
        return MPI_SUCCESS;
    }
    if (failed != nullptr) {
        call(PMPI_Comm_call_errhandler)(failed->handle, MPI_ERR_IN_STATUS);
    }
    return MPI_ERR_IN_STATUS;
}

int Interposer::request_free(MPI_Request* request) {
    Op* op = op_of(*request);
    if (op == nullptr) {
        return PMPI_Request_free(request);
    }
    if (op->on_mpi || !op->active || op->complete) {
        // MPI's own request (an MPI activation of a persistent one, or an inactive one), or
        // done: release it now (MPI completes an active MPI activation in the background).
        if (op->persistent) {
            const MPI_Request handle = op->handle;
            drop_type(*op);
            forget_op(handle);
            return PMPI_Request_free(request);
        }
        release(*op);
        *request = MPI_REQUEST_NULL;
        return MPI_SUCCESS;
    }
    // A carried receive still in flight: it completes in the background, then goes.
    op->freed = true;
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

int Interposer::cancel(MPI_Request* request) {
    Op* op = op_of(*request);
    if (op == nullptr || op->on_mpi) {
        // A receive MPI holds may go unmatched: the streams' counts of messages taken from MPI
        // are no longer known, so nothing more is switched to pmr (carried streams stay).
        cancel_seen_ = true;
        return PMPI_Cancel(request);
    }
    if (!op->active || op->complete || op->kind != Op::Kind::recv) {
        return MPI_SUCCESS; // completed: the cancel has no effect
    }
    if (op->in_queue && op->got == 0) {
        auto& q = op->comm->deferred;
        q.erase(std::find(q.begin(), q.end(), op));
        op->in_queue = false;
        op->complete = true;
        set_status(&op->status, op->peer, op->tag, 0, true, MPI_SUCCESS);
    }
    return MPI_SUCCESS;
}

int Interposer::request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
    Op* op = op_of(request);
    if (op == nullptr || op->on_mpi || !op->active) {
        return PMPI_Request_get_status(request, flag, status);
    }
    progress();
    *flag = op->complete ? 1 : 0;
    if (op->complete && status != MPI_STATUS_IGNORE) {
        *status = op->status;
    }
    return MPI_SUCCESS;
}

InStream* Interposer::ready_stream(Comm& comm, int source, int tag, std::uint64_t& total) {
    for (auto& entry : comm.in) {
        InStream& s = *entry.second;
        if (s.state != InStream::State::carried || s.claimed_mpi < s.switch_at ||
            !overlaps(source, tag, s.peer, s.tag) || s.partial != nullptr ||
            defer_needed(comm, s.peer, s.tag)) {
            continue;
        }
        const unsigned slot = s.next;
        if (s.full[slot] == 0 && s.slots[slot].test()) {
            s.full[slot] = 1;
        }
        if (s.full[slot] != 0) {
            std::memcpy(&total, s.slots[slot].data(), header_bytes);
            if (total != back_to_mpi) {
                return &s;
            }
        }
    }
    return nullptr;
}

int Interposer::iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
    Comm* c = find(comm);
    if (c == nullptr || c->open_streams == 0) {
        return PMPI_Iprobe(source, tag, comm, flag, status);
    }
    progress();
    // A carried stream's next message, if it has arrived and no deferred receive takes it first.
    std::uint64_t total = 0;
    if (InStream* s = ready_stream(*c, source, tag, total)) {
        *flag = 1;
        if (status != MPI_STATUS_IGNORE) {
            set_status(status, s->peer, s->tag, static_cast<std::size_t>(total), false,
                       MPI_SUCCESS);
        }
        return MPI_SUCCESS;
    }
    return PMPI_Iprobe(source, tag, comm, flag, status);
}

namespace {
// A message handle MPI never made: a pointer to our record where MPI_Message is a pointer (Open
// MPI), else an integer outside the ranges MPICH gives out.
template <class Handle>
Handle fake_message(void* record, unsigned number) noexcept {
    if constexpr (std::is_pointer_v<Handle>) {
        (void)number;
        return reinterpret_cast<Handle>(record);
    } else {
        (void)record;
        return static_cast<Handle>(0x7d000000U | (number & 0xffffffU));
    }
}
} // namespace

int Interposer::improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                        MPI_Status* status) {
    Comm* c = find(comm);
    if (c == nullptr) {
        return PMPI_Improbe(source, tag, comm, flag, message, status);
    }
    // A stream a matched probe could take messages of is never proposed from now on: once
    // carried, MPI could not see its messages.
    c->taint(source, tag, Reason::probe);
    if (c->open_streams != 0 || owes()) {
        progress();
    }
    std::uint64_t total = 0;
    if (c->open_streams != 0) {
        if (InStream* s = ready_stream(*c, source, tag, total)) {
            // Taken off the stream now (a matched message is no longer there for receives) and
            // kept until MPI_Mrecv asks for it.
            auto record = std::make_unique<Claimed>();
            record->data.resize(static_cast<std::size_t>(total));
            record->source = s->peer;
            record->tag = s->tag;
            record->comm = comm;
            Op take;
            take.kind = Op::Kind::recv;
            take.buf = record->data.data();
            take.count = static_cast<int>(total);
            take.type = MPI_BYTE;
            take.comm = c;
            if (take_from_slots(*s, take)) {
                *message = fake_message<MPI_Message>(record.get(), ++claimed_count_);
                claimed_[*message] = std::move(record);
                *flag = 1;
                if (status != MPI_STATUS_IGNORE) {
                    set_status(status, s->peer, s->tag, static_cast<std::size_t>(total), false,
                               MPI_SUCCESS);
                }
                return MPI_SUCCESS;
            }
        }
    }
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Improbe(source, tag, comm, flag, message, st);
    if (rc == MPI_SUCCESS && *flag != 0 && st->MPI_SOURCE != MPI_PROC_NULL) {
        // A message of a stream the interposer follows, taken from MPI by the program.
        auto it = c->in.find(std::make_pair(st->MPI_SOURCE, st->MPI_TAG));
        if (it != c->in.end()) {
            ++it->second->claimed_mpi;
        }
    }
    return rc;
}

int Interposer::mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message,
                       MPI_Status* status) {
    Comm* c = find(comm);
    if (c == nullptr) {
        return PMPI_Mprobe(source, tag, comm, message, status);
    }
    return block([&](int& flag) { return improbe(source, tag, comm, &flag, message, status); });
}

int Interposer::deliver(const std::byte* data, std::size_t bytes, void* buf, int count,
                        MPI_Datatype type, MPI_Comm comm, int source, int tag, MPI_Status* status) {
    const TypeInfo& info = type_info(type);
    const std::size_t room = static_cast<std::size_t>(count) * static_cast<std::size_t>(info.size);
    int error = bytes > room ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
    std::size_t delivered = std::min(bytes, room);
    if (info.contiguous) {
        if (delivered != 0) {
            std::memcpy(static_cast<std::byte*>(buf) + info.lb, data, delivered);
        }
    } else {
        int position = 0;
        if (PMPI_Unpack(data, static_cast<int>(bytes), &position, buf, count, type, comm) !=
            MPI_SUCCESS) {
            error = MPI_ERR_TRUNCATE;
        }
        delivered = static_cast<std::size_t>(position);
    }
    if (status != MPI_STATUS_IGNORE) {
        set_status(status, source, tag, delivered, false, error);
    }
    return error;
}

int Interposer::mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message,
                      MPI_Status* status) {
    auto it = claimed_.find(*message);
    if (it == claimed_.end()) {
        return PMPI_Mrecv(buf, count, type, message, status);
    }
    const std::unique_ptr<Claimed> record = std::move(it->second);
    claimed_.erase(it);
    *message = MPI_MESSAGE_NULL;
    const int rc = deliver(record->data.data(), record->data.size(), buf, count, type, record->comm,
                           record->source, record->tag, status);
    if (rc != MPI_SUCCESS) {
        call(PMPI_Comm_call_errhandler)(record->comm, rc);
    }
    return rc;
}

int Interposer::imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message,
                       MPI_Request* request) {
    auto it = claimed_.find(*message);
    if (it == claimed_.end()) {
        return PMPI_Imrecv(buf, count, type, message, request);
    }
    // The data is here: the receive completes at once, its request reports it.
    Comm* c = find(it->second->comm);
    Op* op =
        make_op(Op::Kind::recv, false, buf, count, type, it->second->source, it->second->tag, c);
    op->active = true;
    op->error = deliver(it->second->data.data(), it->second->data.size(), buf, count, type,
                        it->second->comm, it->second->source, it->second->tag, &op->status);
    op->complete = true;
    claimed_.erase(it);
    *message = MPI_MESSAGE_NULL;
    *request = op->handle;
    return MPI_SUCCESS;
}

int Interposer::probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
    Comm* c = find(comm);
    if (c == nullptr || c->open_streams == 0) {
        if (!owes()) {
            return PMPI_Probe(source, tag, comm, status);
        }
    }
    return block([&](int& flag) { return iprobe(source, tag, comm, &flag, status); });
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
