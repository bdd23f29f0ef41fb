// SPDX-License-Identifier: MIT
// Probes and matched receives (MPI_Mprobe, MPI_Mrecv) over carried streams.
#include "mpi/interposer.hpp"

#include "mpi/pmpi.hpp"
#include "mpi/support.hpp"

#include <cstring>

namespace pmr::mpi {

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
            copy_bytes(static_cast<std::byte*>(buf) + info.lb, data, delivered);
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

} // namespace pmr::mpi
