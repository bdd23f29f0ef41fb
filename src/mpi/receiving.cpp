// SPDX-License-Identifier: MIT
// Receives: operations, matching against carried streams and MPI, and progress.
#include "mpi/interposer.hpp"

#include "mpi/pmpi.hpp"
#include "mpi/support.hpp"

#include <algorithm>
#include <cstring>

namespace pmr::mpi {

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
        op->out = nullptr;
        op->own_type = false;
    } else {
        // A real, never started persistent request: a handle every MPI call accepts (also
        // through the Fortran bindings), which stands for an operation the interposer carries.
        MPI_Request handle = MPI_REQUEST_NULL;
        call(PMPI_Send_init)(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, &handle);
        op = &adopt(handle);
    }
    op->describe(kind, persistent, buf, count, type, peer, tag, comm);
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
        } else if (InStream* s =
                       op.stream != nullptr ? op.stream : in_stream(*c, op.peer, op.tag)) {
            op.stream = s;
            if (s->state == InStream::State::carried && s->claimed_mpi >= s->switch_at &&
                s->partial == nullptr && !defer_needed(*c, op.peer, op.tag)) {
                // The steady state of a carried stream: its message is there already, or this
                // receive waits in the queue with nothing before it that could take its
                // messages (a look at the queue now would try just what was tried here).
                if (take_from_slots(*s, op)) {
                    complete_op(op);
                    return;
                }
                if (s->state == InStream::State::carried && s->partial == nullptr) {
                    queue(op);
                    return;
                }
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
                } else if (below_min(*s, bytes, op.persistent)) {
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
        queue(op);
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

void Interposer::queue(Op& op) {
    Comm* c = op.comm;
    op.in_queue = true;
    if (c->deferred.empty()) {
        deferring_comms_.push_back(c);
    }
    c->deferred.push_back(&op);
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
        const bool small = below_min(*s, bytes, false);
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
    Op& op = adopt(*request);
    op.describe(Op::Kind::recv, true, buf, count, type, source, tag, c);
    hold_type(op);
    return rc;
}

Op& Interposer::adopt(MPI_Request handle) {
    auto fresh = std::make_unique<Op>();
    fresh->handle = handle;
    recent_op_[recent_index(handle, recent_ops)] = {};
    op_filter_[recent_index(handle, op_filter_bits)] = true;
    Op& op = *fresh;
    ops_[handle] = std::move(fresh);
    return op;
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
        const std::size_t chunk = bytes > header_bytes ? bytes - payload_offset : 0;
        const std::byte* payload = window.data() + payload_offset;
        if (info.contiguous) {
            if (op.got < room) {
                copy_bytes(static_cast<std::byte*>(op.buf) + info.lb + op.got, payload,
                           std::min(chunk, room - op.got));
            }
        } else {
            copy_bytes(op.staging.data() + op.got, payload, chunk);
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

} // namespace pmr::mpi
