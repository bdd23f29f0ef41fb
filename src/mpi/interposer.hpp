// SPDX-License-Identifier: MIT
// libpmr-mpi: carries an unmodified MPI program's repeated point-to-point streams and global sums
// on pmr. Internal header of src/mpi/ (built on the public API only, like the collectives).
//
// The unit carried is a *stream*: the messages of one (communicator, source, destination, tag),
// which MPI delivers in order. The receiver decides to carry a stream once it has repeated (a
// persistent receive started, or plain receives posted, PMR_MPI_REPEATS times), proposes it to the
// sender over a private duplicate of MPI_COMM_WORLD and keeps matching the stream's messages from
// MPI until the sender answers. The sender answers with the message number k from which it sends
// on pmr (never below the number of receives the receiver had already posted to MPI): messages
// before k arrive through MPI, messages from k on through a ring of library-owned pmr windows.
// Every send and receive of the stream goes the same way, persistent or not, so MPI's order
// within a stream is kept whatever mix of calls the program makes.
#pragma once

#include "mpi/support.hpp"

#include <pmr/collectives.hpp>
#include <pmr/communicator.hpp>
#include <pmr/connection.hpp>
#include <pmr/window.hpp>

#include <mpi.h>

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace pmr::mpi {

/// PMR_MPI: what is carried.
enum class Mode : unsigned char { off, persistent, all };

/// Why a stream or collective stays on MPI (the report counts them).
enum class Reason : unsigned char {
    carried,
    few_repeats,
    plain_receives, // persistent mode, the receiver posts plain receives
    wildcard,       // the receiver's communicator saw MPI_ANY_SOURCE / MPI_ANY_TAG
    probe,          // ... or a probe
    unknown_comm,   // made by a call the interposer does not follow (e.g. MPI_Comm_create_group)
    intercomm,
    self,
    too_large,    // above PMR_MPI_MAX_BYTES
    too_small,    // all below PMR_MPI_MIN_BYTES (MPI's own small-message path is as fast)
    stream_limit, // PMR_MPI_MAX_STREAMS streams are carried already
    cancelled,    // the program cancelled a receive MPI held (its count of messages is unknown)
    refused,      // the sender said no (its communicator is gone, or it runs PMR_MPI=off)
    handed_back,  // carried, then the sender sent it back (a message larger than the slots, or
                  // a synchronous send)
    datatype,     // collectives: not a built-in type or operation pmr reduces
    disagreement, // collectives: the ranks did not all qualify
    count_
};
const char* reason_name(Reason reason) noexcept;

struct Settings {
    Mode mode = Mode::all;
    unsigned repeats = 3;
    std::size_t max_bytes = std::size_t{4} << 10; // measured: carried streams can lose from 8 KiB
    std::size_t min_bytes = 1024; // plain receives; measured: below, MPI's own path is as fast
    std::size_t min_bytes_persistent = 0; // persistent receives: MPI's path costs more
    unsigned slots = 2;
    unsigned max_streams = 64; // carried streams per process and direction
    bool report = false;
    int report_level = 0;                         // PMR_MPI_REPORT: 1 summary, 2 also every stream
    std::size_t rd_bytes = std::size_t{64} << 10; // global sums by recursive doubling up to this
};

struct TypeInfo {
    int size = 0;
    bool contiguous = true; // the data of `count` elements is `count * size` bytes from buf (+ lb)
    MPI_Aint lb = 0;
    bool named = true; // a built-in type, never freed
};

struct Comm;
struct CollectiveState;
struct InStream;
struct OutStream;

/// A request the interposer handles (carried or deferred); everything else stays MPI's own.
struct Op {
    enum class Kind : unsigned char { send, recv, collective };
    Kind kind = Kind::recv;
    bool persistent = false;
    bool active = false;
    bool complete = false;
    bool on_mpi = false; // this activation is MPI's (the handle is an MPI request in flight)
    bool freed = false;  // MPI_Request_free while active: retire on completion
    bool cancelled = false;
    bool in_queue = false;
    MPI_Request handle = MPI_REQUEST_NULL; // what the application holds
    MPI_Request inner = MPI_REQUEST_NULL;  // a plain operation handed to MPI after deferral
    void* buf = nullptr;
    int count = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    int peer = MPI_PROC_NULL;
    int tag = 0;
    Comm* comm = nullptr;
    MPI_Status status{};
    int error = MPI_SUCCESS;
    // A message arriving in several chunks.
    std::size_t got = 0;
    std::size_t total = 0;
    std::vector<std::byte> staging;        // packed data of non-contiguous receives
    CollectiveState* collective = nullptr; // a carried MPI_Iallreduce: its run
    InStream* stream = nullptr; // a receive from one source with one tag: its stream, if any
    OutStream* out = nullptr;   // a persistent send: its stream, once looked up
    bool own_type = false; // `type` is our duplicate of a derived type (the program may free its)
    bool synchronous = false; // MPI_Ssend_init

    /// What the program asked for: the fields every way of making an operation sets.
    void describe(Kind what, bool is_persistent, void* buffer, int elements, MPI_Datatype datatype,
                  int peer_rank, int message_tag, Comm* in) noexcept {
        kind = what;
        persistent = is_persistent;
        buf = buffer;
        count = elements;
        type = datatype;
        peer = peer_rank;
        tag = message_tag;
        comm = in;
    }
};

struct Counters {
    std::uint64_t messages = 0;
    std::uint64_t bytes = 0;
};

/// A carried message the sender keeps until slots are free for it (or for its rest, from
/// `offset` on).
struct Held {
    std::vector<std::byte> data;
    std::size_t total = 0;
    std::size_t offset = 0;
};

struct OutStream {
    Comm* comm = nullptr;
    int peer = 0; // the destination
    int tag = 0;
    int peer_world = 0;
    bool carried = false;
    bool handed_back = false;   // a message too large for the slots sent the stream back to MPI
    bool synchronous = false;   // a synchronous send seen: MPI's for good (its completion says
                                // that the receive has started, which slots cannot tell)
    std::uint64_t sent_mpi = 0; // messages sent through MPI so far
    std::uint64_t switch_at = 0;
    std::size_t capacity = 0; // payload bytes per slot
    std::vector<pmr::SendWindow<std::byte>> slots;
    std::vector<unsigned char> busy;
    std::deque<Held> pending; // messages waiting for a free slot, in order
    unsigned next = 0;
    bool listed_busy = false;
    Counters pmr_sent;
};

struct InStream {
    enum class State : unsigned char { mpi, proposing, carried, refused };
    Comm* comm = nullptr;
    int peer = 0; // the source
    int tag = 0;
    int peer_world = 0;
    State state = State::mpi;
    Reason reason = Reason::few_repeats;
    std::uint64_t claimed_mpi = 0; // messages of this stream taken (or to be taken) through MPI
    std::uint64_t switch_at = 0;
    unsigned repeats = 0;
    std::size_t max_bytes = 0;
    std::size_t capacity = 0;
    /// Comm::taint_count when no taint of the communicator overlapped this stream (a look at the
    /// taints is needed only after a new one).
    std::uint64_t untainted_at = ~std::uint64_t{0};
    std::vector<pmr::RecvWindow<std::byte>> slots;
    std::vector<unsigned char> full; // the slot's round completed and is not consumed yet
    unsigned next = 0;
    Op* partial = nullptr;    // a receive that has taken the first chunks of a long message
    double proposed_at = 0;   // MPI_Wtime of the proposal
    double setup_seconds = 0; // from the proposal to the sender's answer
    Counters pmr_received;
};

/// One built-in collective call signature on a communicator.
struct CollectiveKey {
    int kind = 0; // 0 allreduce, 1 barrier, 2 bcast
    std::int64_t count = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_Op op = MPI_OP_NULL;
    int root = 0;
    bool operator<(const CollectiveKey& o) const noexcept;
    bool operator==(const CollectiveKey& o) const noexcept {
        return kind == o.kind && count == o.count && type == o.type && op == o.op && root == o.root;
    }
};

struct CollectiveState {
    unsigned calls = 0;
    bool decided = false;
    Reason reason = Reason::few_repeats;
    pmr::detail::CollectiveCore core;
    std::size_t bytes = 0;
    Counters carried;
};

struct Comm {
    MPI_Comm handle = MPI_COMM_NULL;
    std::uint64_t id = 0; // agreed by every member (0: unknown, never carried)
    Reason unknown_reason = Reason::unknown_comm;
    int rank = 0;
    int size = 0;
    std::vector<int> world; // world rank of each rank, filled on first use
    std::uint32_t children = 0;
    bool freed = false;
    /// Patterns (source, tag) of wildcard receives and matched probes seen here: a stream they
    /// could have taken messages of is never proposed (its count of MPI messages would be
    /// unknown, or MPI_Mprobe could not see it once carried).
    struct Taint {
        int source;
        int tag;
        Reason reason;
    };
    std::vector<Taint> taints;
    std::uint64_t taint_count = 0; // taints ever added (the vector is reset when it grows large)
    void taint(int source, int tag, Reason reason);
    /// The reason a stream from `source` with `tag` must stay on MPI, or Reason::carried.
    Reason tainted(int source, int tag) const noexcept;
    unsigned open_streams = 0; // in-streams proposing or carried
    std::map<std::pair<int, int>, std::unique_ptr<OutStream>> out;
    std::map<std::pair<int, int>, std::unique_ptr<InStream>> in;
    /// The streams looked up last, by (peer, tag): a halo's few streams are found without a
    /// search on every call. Streams live as long as their communicator, so entries stay valid.
    template <class Stream>
    struct Recent {
        int peer = MPI_PROC_NULL;
        int tag = 0;
        Stream* stream = nullptr;
    };
    static constexpr std::size_t recent_size = 16;
    static std::size_t recent_slot(int peer, int tag) noexcept {
        const auto mixed = static_cast<unsigned>(peer) * 0x9E3779B1U + static_cast<unsigned>(tag);
        return (mixed ^ (mixed >> 16)) % recent_size;
    }
    Recent<OutStream> recent_out[recent_size];
    Recent<InStream> recent_in[recent_size];
    std::deque<Op*> deferred; // receives waiting for a match, in posting order
    std::unique_ptr<pmr::Communicator> pcomm;
    std::map<CollectiveKey, CollectiveState> collectives;
    /// The decided signature looked up last: a loop of sums finds it without a search. Map
    /// entries stay where they are as long as the communicator lives.
    CollectiveKey last_key;
    CollectiveState* last_collective = nullptr;
};

/// The interposer's whole state; one per process.
class Interposer {
public:
    static Interposer& get() noexcept;

    bool enabled() const noexcept { return enabled_; }

    // The steady state of a stream MPI carries, at a cost next to MPI's own small-message path:
    // found in the last communicator's recent streams, counted, and nothing else. Each answers
    // false where anything more is to be done; the full path (isend, irecv) then decides.
    /// A plain standard-mode send on a stream never carried, between two looks for proposals.
    bool counted_send(MPI_Comm comm, int dest, int tag) noexcept {
        if (comm != last_comm_ || comm == MPI_COMM_NULL) {
            return false;
        }
        const Comm::Recent<OutStream>& e =
            last_comm_state_->recent_out[Comm::recent_slot(dest, tag)];
        OutStream* s = e.stream;
        if (s == nullptr || e.peer != dest || e.tag != tag || s->carried) {
            return false;
        }
        const std::uint64_t n = s->sent_mpi;
        if (look_due(n)) {
            return false; // a look for proposals is due (worth_polling)
        }
        s->sent_mpi = n + 1;
        return true;
    }
    /// A plain receive from one source with one tag, with nothing queued on the communicator,
    /// on a stream that stays on MPI: what irecv decides, in the same order.
    bool counted_receive(MPI_Comm comm, int source, int tag, int count,
                         MPI_Datatype type) noexcept {
        if (comm != last_comm_ || comm == MPI_COMM_NULL || type != last_type_ ||
            last_type_info_ == nullptr || !last_comm_state_->deferred.empty()) {
            return false;
        }
        const Comm::Recent<InStream>& e =
            last_comm_state_->recent_in[Comm::recent_slot(source, tag)];
        InStream* s = e.stream;
        if (s == nullptr || e.peer != source || e.tag != tag ||
            (s->state != InStream::State::mpi && s->state != InStream::State::refused)) {
            return false;
        }
        if (s->state == InStream::State::mpi) {
            const auto bytes =
                static_cast<std::size_t>(count) * static_cast<std::size_t>(last_type_info_->size);
            const bool small = below_min(*s, bytes, false);
            if (!small && settings_.mode == Mode::all) {
                return false; // it may make the stream carried
            }
            if (small) {
                s->max_bytes = std::max(s->max_bytes, bytes);
                s->reason = Reason::too_small;
            }
        }
        if (settings_.mode != Mode::all) {
            s->reason = Reason::plain_receives;
        }
        ++s->claimed_mpi;
        return true;
    }
    const Settings& settings() const noexcept { return settings_; }
    /// Whether a receive of `bytes` keeps its stream below the smallest size carried for its
    /// kind (PMR_MPI_MIN_BYTES for plain receives, PMR_MPI_MIN_BYTES_PERSISTENT for persistent).
    bool below_min(const InStream& s, std::size_t bytes, bool persistent) const noexcept {
        const std::size_t least = persistent ? settings_.min_bytes_persistent : settings_.min_bytes;
        return bytes < least && s.max_bytes < least;
    }

    void start(int provided_thread_level);
    void finish();

    Comm* find(MPI_Comm comm) noexcept;
    void comm_created(MPI_Comm parent, MPI_Comm child);
    void comm_freed(MPI_Comm comm);
    /// A communicator made by a call the interposer does not follow: forget what the handle
    /// meant before (it may have been freed without our seeing it, or be reused).
    void comm_unknown(MPI_Comm comm) { comm_freed(comm); }
    void type_freed(MPI_Datatype type);

    // Point-to-point.
    int send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
             int mode);
    int isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              int mode, MPI_Request* request);
    int recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status* status);
    int irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request* request);
    int send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                  int mode, MPI_Request* request);
    int recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                  MPI_Request* request);
    int start(MPI_Request* request);
    int startall(int count, MPI_Request* requests);
    /// Counts the start of a followed persistent request whose stream stays on MPI, as start()
    /// would, and marks it MPI's; false (nothing done) where start() has more to decide.
    bool start_on_mpi(Op& op);
    int wait(MPI_Request* request, MPI_Status* status);
    int test(MPI_Request* request, int* flag, MPI_Status* status);
    int waitall(int count, MPI_Request* requests, MPI_Status* statuses);
    int testall(int count, MPI_Request* requests, int* flag, MPI_Status* statuses);
    int waitany(int count, MPI_Request* requests, int* index, MPI_Status* status);
    int testany(int count, MPI_Request* requests, int* index, int* flag, MPI_Status* status);
    int waitsome(int incount, MPI_Request* requests, int* outcount, int* indices,
                 MPI_Status* statuses);
    int testsome(int incount, MPI_Request* requests, int* outcount, int* indices,
                 MPI_Status* statuses);
    int request_free(MPI_Request* request);
    int cancel(MPI_Request* request);
    int request_get_status(MPI_Request request, int* flag, MPI_Status* status);
    int iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status);
    int probe(int source, int tag, MPI_Comm comm, MPI_Status* status);
    int improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                MPI_Status* status);
    int mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status);
    int mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status);
    int imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Request* request);
    /// Whether `message` is one the interposer handed out (a carried stream's message taken
    /// by a matched probe); MPI has never seen it.
    bool claimed(MPI_Message message) const noexcept {
        return !claimed_.empty() && claimed_.count(message) != 0;
    }

    // Collectives.
    int allreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm);
    int iallreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request);
    int barrier(MPI_Comm comm);
    int bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm);

    /// MPI calls the interposer made itself since start (set-up, control, MPI-bound traffic of
    /// streams it follows): tests read it to check that carried traffic makes none.
    std::uint64_t own_mpi_calls() const noexcept { return own_mpi_calls_; }
    void count_mpi_call() noexcept { ++own_mpi_calls_; }
    /// Messages sent and received on pmr streams so far.
    std::uint64_t carried_messages() const;

private:
    /// start() of the operation behind `request`, found already (null: MPI's own request).
    int start(Op* op, MPI_Request* request);
    Interposer() = default;

    // Streams.
    OutStream* out_stream(Comm& comm, int dest, int tag);
    InStream* in_stream(Comm& comm, int source, int tag);
    template <class Stream>
    Stream* stream_of(Comm& comm, std::map<std::pair<int, int>, std::unique_ptr<Stream>>& streams,
                      Comm::Recent<Stream>* recent, int peer, int tag);
    bool world_of(Comm& comm);
    void propose(InStream& stream);
    void poll_control();
    bool worth_polling(const OutStream& stream, int count, MPI_Datatype type);
    /// Whether carried traffic needs this process's progress (a blocking MPI call must then be
    /// made non-blocking and polled beside it).
    bool owes() const noexcept {
        return !busy_streams_.empty() || !deferring_comms_.empty() || open_proposals_ != 0;
    }
    int wait_mpi(MPI_Request* request, MPI_Status* status);
    void handle_control(const std::int64_t* message, int from_world);
    void accept(InStream& stream, std::uint64_t switch_at);
    pmr::Connection& connection(int world_peer);

    // Sending and receiving through streams.
    /// Sends on the stream's windows; false when the message is larger than their slots and the
    /// stream was handed back to MPI (the caller then sends it through MPI).
    bool send_carried(OutStream& stream, const void* buf, int count, MPI_Datatype type);
    /// A synchronous send on the stream: it goes back to MPI for good, in order.
    void synchronous_send(OutStream& stream);
    void hand_back(OutStream& stream);
    static bool on_pmr(const OutStream& s) noexcept {
        return s.carried && !s.handed_back && s.sent_mpi >= s.switch_at;
    }
    void send_bytes(OutStream& stream, const std::byte* source, std::size_t total);
    bool slot_free(OutStream& stream, unsigned slot);
    void list_busy(OutStream& stream);
    std::size_t put_chunks(OutStream& stream, const std::byte* source, std::size_t total,
                           std::size_t offset);
    void flush(OutStream& stream);
    /// A new operation known by `handle` (a request MPI made), found by op_of from now on.
    Op& adopt(MPI_Request handle);
    Op* make_op(Op::Kind kind, bool persistent, void* buf, int count, MPI_Datatype type, int peer,
                int tag, Comm* comm);
    void activate_recv(Op& op);
    /// Puts a receive at the end of its communicator's queue of receives waiting for a match.
    void queue(Op& op);
    bool defer_needed(const Comm& comm, int source, int tag) const;
    bool open_stream_matches(const Comm& comm, int source, int tag) const;
    bool try_match(Op& op);
    bool take_from_slots(InStream& stream, Op& op);
    bool take_from_mpi(Op& op, int source, int tag);
    /// A carried stream matching (source, tag) whose next message has arrived and that no
    /// deferred receive takes first; its size in `total`.
    InStream* ready_stream(Comm& comm, int source, int tag, std::uint64_t& total);
    /// Delivers `bytes` of packed data into a receive's buffer as MPI would: the status, and
    /// MPI_ERR_TRUNCATE when the buffer is too small (nothing written past it).
    int deliver(const std::byte* data, std::size_t bytes, void* buf, int count, MPI_Datatype type,
                MPI_Comm comm, int source, int tag, MPI_Status* status);
    void progress();
    void progress_deferred(Comm& comm);
    void complete_op(Op& op);
    void retire(Op& op);
    Op* op_of(MPI_Request handle) noexcept;
    void forget_op(MPI_Request handle) noexcept;
    bool own_pending(int count, const MPI_Request* requests) noexcept;
    int finish_request(MPI_Request* request, MPI_Status* status);
    /// One request of a Testany/Testsome array, looked at without waiting: whether it is active
    /// (an inactive persistent or a null request is not) and, if it completed, its result (the
    /// request is then reset or released, its status written).
    struct Look {
        bool active = false;
        bool finished = false;
        int rc = MPI_SUCCESS;
        Comm* comm = nullptr; // of a request the interposer carried
    };
    Look look(MPI_Request* request, MPI_Status* status);
    void wait_until(const std::function<bool()>& done);
    void release(Op& op);
    /// Keeps a derived datatype alive for an operation (MPI lets the program free it while the
    /// operation is pending): the operation holds a duplicate, freed with it.
    void hold_type(Op& op);
    void drop_type(Op& op);
    const TypeInfo& type_info(MPI_Datatype type);

    // Collectives.
    CollectiveState* collective(Comm& comm, const CollectiveKey& key, bool qualifies,
                                std::size_t bytes);
    void run(CollectiveState& state);

    void write_report();

    bool enabled_ = false;
    bool finished_ = false;
    Settings settings_;
    int world_rank_ = 0;
    int world_size_ = 0;
    MPI_Comm control_ = MPI_COMM_NULL;
    MPI_Request control_request_ = MPI_REQUEST_NULL;
    std::int64_t control_buffer_[6]{};
    unsigned open_proposals_ = 0;
    std::unique_ptr<pmr::Communicator> world_;
    std::unordered_map<int, std::unique_ptr<pmr::Connection>> connections_;
    std::unordered_map<MPI_Comm, std::unique_ptr<Comm>> comms_;
    std::unordered_map<std::uint64_t, Comm*> by_id_;
    std::vector<std::unique_ptr<Comm>> freed_comms_;
    std::unordered_map<MPI_Request, std::unique_ptr<Op>> ops_;
    /// The operations found last, by handle (direct-mapped): a wait on a halo's requests finds
    /// its operations without hashing. Only hits are kept; forget_op() clears an entry.
    struct RecentOp {
        MPI_Request handle = MPI_REQUEST_NULL;
        Op* op = nullptr;
    };
    static constexpr std::size_t recent_ops = 64;
    RecentOp recent_op_[recent_ops];
    /// A bit per hash of every handle ever given an Op: a handle whose bit is clear is MPI's
    /// own, found without a search (requests MPI keeps are the common case of a wait).
    static constexpr std::size_t op_filter_bits = 4096;
    std::bitset<op_filter_bits> op_filter_;
    // The communicator and datatype used last.
    MPI_Comm last_comm_ = MPI_COMM_NULL;
    Comm* last_comm_state_ = nullptr;
    MPI_Datatype last_type_ = MPI_DATATYPE_NULL;
    const TypeInfo* last_type_info_ = nullptr;
    std::vector<Op*> free_ops_; // kept with their handles for the next plain operation
    std::vector<OutStream*> busy_streams_;
    std::vector<Comm*> deferring_comms_;
    std::vector<Op*> collective_ops_; // carried MPI_Iallreduce runs in flight
    std::unordered_map<MPI_Datatype, TypeInfo> types_;
    /// Messages of carried streams taken by MPI_Mprobe / MPI_Improbe, by the handle given out.
    struct Claimed {
        std::vector<std::byte> data;
        int source = 0;
        int tag = 0;
        MPI_Comm comm = MPI_COMM_NULL;
    };
    std::unordered_map<MPI_Message, std::unique_ptr<Claimed>> claimed_;
    unsigned claimed_count_ = 0;
    std::uint64_t own_mpi_calls_ = 0;
    std::string off_reason_;
    bool cancel_seen_ = false; // no stream is proposed after that
    unsigned streams_in_ = 0;  // proposed or carried, as receiver
    unsigned streams_out_ = 0; // carried, as sender
};

/// Set while pmr itself runs: its MPI calls go straight to MPI. Read and written on every MPI
/// call: in the static TLS block (the library is loaded with the program, by pmr-run's preload
/// or by linking), where an access is one instruction instead of a call to __tls_get_addr.
extern thread_local bool inside_pmr __attribute__((tls_model("initial-exec")));

} // namespace pmr::mpi
