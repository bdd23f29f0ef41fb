// SPDX-License-Identifier: MIT
// Requests: start, wait, test, free and cancel, over carried and MPI requests alike.
#include "mpi/interposer.hpp"

#include "mpi/pmpi.hpp"
#include "mpi/support.hpp"

#include <algorithm>
#include <functional>

namespace pmr::mpi {

// ---------------------------------------------------------------------------------------------
// Requests

Op* Interposer::op_of(MPI_Request handle) noexcept {
    if (ops_.empty() || handle == MPI_REQUEST_NULL) {
        return nullptr;
    }
    // MPI's own requests, the most common, are told by the filter alone.
    if (!op_filter_[recent_index(handle, op_filter_bits)]) {
        return nullptr;
    }
    RecentOp& recent = recent_op_[recent_index(handle, recent_ops)];
    if (recent.handle == handle && recent.op != nullptr) {
        return recent.op;
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
    return start(op_of(*request), request);
}

int Interposer::start(Op* op, MPI_Request* request) {
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
    OutStream* s = op->out != nullptr ? op->out : (op->out = out_stream(*c, op->peer, op->tag));
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

bool Interposer::start_on_mpi(Op& op) {
    if (op.kind == Op::Kind::send) {
        OutStream* s = op.out;
        if (s == nullptr || s->carried || op.synchronous) {
            return false;
        }
        const std::uint64_t n = s->sent_mpi;
        if (look_due(n)) {
            return false; // a look for proposals is due (worth_polling)
        }
        s->sent_mpi = n + 1;
    } else if (op.kind == Op::Kind::recv) {
        // What activate_recv decides for a stream on MPI that nothing could move: one refused for
        // good (a wildcard or probe seen on its communicator: taints only grow; a cancel; a
        // message above PMR_MPI_MAX_BYTES: its largest only grows), or one below
        // PMR_MPI_MIN_BYTES with nothing that would give it another reason.
        InStream* s = op.stream;
        Comm* c = op.comm;
        if (s == nullptr || s->state != InStream::State::mpi || !c->deferred.empty()) {
            return false;
        }
        switch (s->reason) {
        case Reason::wildcard:
        case Reason::probe:
        case Reason::cancelled:
        case Reason::too_large:
            break;
        case Reason::too_small: {
            if (cancel_seen_ || streams_in_ >= settings_.max_streams) {
                return false;
            }
            if (s->untainted_at != c->taint_count) {
                if (c->tainted(op.peer, op.tag) != Reason::carried) {
                    return false;
                }
                s->untainted_at = c->taint_count;
            }
            const auto bytes = static_cast<std::size_t>(op.count) *
                               static_cast<std::size_t>(type_info(op.type).size);
            if (!below_min(*s, bytes, op.persistent)) {
                return false;
            }
            break;
        }
        default:
            return false;
        }
        ++s->repeats;
        ++s->claimed_mpi;
        op.cancelled = false;
        op.error = MPI_SUCCESS;
        op.got = 0;
        op.total = 0;
    } else {
        return false;
    }
    op.active = true;
    op.complete = false;
    op.on_mpi = true;
    return true;
}

int Interposer::startall(int count, MPI_Request* requests) {
    // MPI's own requests, and a halo whose streams all stay on MPI (counted here): started by
    // MPI in one call; from the first request that needs more on, one by one.
    int i = 0;
    Op* next = nullptr; // the operation of requests[i] where the loop below stopped
    if (!ops_.empty()) {
        while (i < count) {
            Op* op = op_of(requests[i]);
            if (op != nullptr && !start_on_mpi(*op)) {
                next = op;
                break;
            }
            ++i;
        }
    } else {
        i = count;
    }
    if (i > 0) {
        const int rc = PMPI_Startall(i, requests);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
    }
    for (; i < count; ++i) {
        const int rc = start(next != nullptr ? next : op_of(requests[i]), &requests[i]);
        next = nullptr;
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
    if (ops_.empty() && !owes()) {
        return PMPI_Waitall(count, requests, statuses);
    }
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

} // namespace pmr::mpi
