// SPDX-License-Identifier: MIT
// Streams: the agreement that carries one, and the sending side of a carried stream.
#include "mpi/interposer.hpp"

#include "mpi/pmpi.hpp"
#include "mpi/support.hpp"

#include <algorithm>
#include <cstring>

namespace pmr::mpi {

// ---------------------------------------------------------------------------------------------
// Streams and their agreement

template <class Stream>
Stream* Interposer::stream_of(Comm& comm,
                              std::map<std::pair<int, int>, std::unique_ptr<Stream>>& streams,
                              Comm::Recent<Stream>* recent, int peer, int tag) {
    Comm::Recent<Stream>& entry = recent[Comm::recent_slot(peer, tag)];
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
        stream.slots.emplace_back(c, capacity + payload_offset);
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
    // Later in a stream's life, proposals are looked for more rarely (look_due).
    if (!look_due(stream.sent_mpi)) {
        return false;
    }
    return static_cast<std::size_t>(count) * static_cast<std::size_t>(type_info(type).size) <=
           settings_.max_bytes;
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
            windows.emplace_back(c, capacity + payload_offset);
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
    held.data.resize(total);
    copy_bytes(held.data.data(), source, total);
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
            copy_bytes(window.data() + payload_offset, source + offset, chunk);
        }
        window.post(pmr::Elements{chunk == 0 ? header_bytes : payload_offset + chunk});
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
    Op& op = adopt(*request);
    op.describe(Op::Kind::send, true, const_cast<void*>(buf), count, type, dest, tag, c);
    op.synchronous = mode == 1;
    hold_type(op);
    return rc;
}

} // namespace pmr::mpi
