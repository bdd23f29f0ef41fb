// SPDX-License-Identifier: MIT
// Fortran entry points (mpif.h and `use mpi`, gfortran's names: lower case with one underscore)
// for Open MPI, whose Fortran bindings call PMPI_* directly and so would pass the interposer by.
// Each converts the Fortran handles and forwards to the C function of this library. MPICH's
// Fortran bindings call the C functions MPI_*, which the C wrappers already catch.
#include <mpi.h>

#if defined(OPEN_MPI)

#include "mpi/interposer.hpp"

#include <cstddef>
#include <vector>

extern "C" {
// Open MPI's addresses of the Fortran constants MPI_IN_PLACE and MPI_BOTTOM (in libmpi).
extern int mpi_fortran_in_place_;
extern int mpi_fortran_bottom_;
}

namespace {

// MPI_STATUS_SIZE of the Fortran bindings: a status is MPI_Status's integers.
constexpr int status_size = static_cast<int>(sizeof(MPI_Status) / sizeof(MPI_Fint));

void* buffer(void* fortran) {
    if (fortran == &mpi_fortran_in_place_) {
        return MPI_IN_PLACE;
    }
    if (fortran == &mpi_fortran_bottom_) {
        return MPI_BOTTOM;
    }
    return fortran;
}

MPI_Status* status_out(MPI_Fint* fortran, MPI_Status* c) {
    return fortran == MPI_F_STATUS_IGNORE ? MPI_STATUS_IGNORE : c;
}

void status_back(MPI_Fint* fortran, const MPI_Status* c) {
    if (fortran != MPI_F_STATUS_IGNORE) {
        PMPI_Status_c2f(c, fortran);
    }
}

/// A Fortran request array as C handles, written back after the call.
class Requests {
public:
    Requests(MPI_Fint* fortran, int count)
        : fortran_(fortran), c_(static_cast<std::size_t>(count > 0 ? count : 0)) {
        for (std::size_t i = 0; i < c_.size(); ++i) {
            c_[i] = PMPI_Request_f2c(fortran_[i]);
        }
    }
    Requests(const Requests&) = delete;
    Requests& operator=(const Requests&) = delete;
    ~Requests() {
        for (std::size_t i = 0; i < c_.size(); ++i) {
            fortran_[i] = PMPI_Request_c2f(c_[i]);
        }
    }
    MPI_Request* data() { return c_.data(); }

private:
    MPI_Fint* fortran_;
    std::vector<MPI_Request> c_;
};

/// Fortran statuses for `count` requests (or MPI_F_STATUSES_IGNORE).
class Statuses {
public:
    Statuses(MPI_Fint* fortran, int count)
        : fortran_(fortran),
          c_(fortran == MPI_F_STATUSES_IGNORE ? 0 : static_cast<std::size_t>(count)) {}
    Statuses(const Statuses&) = delete;
    Statuses& operator=(const Statuses&) = delete;
    MPI_Status* data() {
        return fortran_ == MPI_F_STATUSES_IGNORE ? MPI_STATUSES_IGNORE : c_.data();
    }
    void back(int count) {
        for (int i = 0; i < count && !c_.empty(); ++i) {
            PMPI_Status_c2f(&c_[static_cast<std::size_t>(i)],
                            fortran_ + static_cast<std::ptrdiff_t>(i) * status_size);
        }
    }

private:
    MPI_Fint* fortran_;
    std::vector<MPI_Status> c_;
};

MPI_Fint out(int rc) {
    return static_cast<MPI_Fint>(rc);
}

/// MPI_Waitsome and MPI_Testsome from Fortran: 1-based indices, statuses of the completed ones.
void some(int (*call)(int, MPI_Request*, int*, int*, MPI_Status*), const MPI_Fint* incount,
          MPI_Fint* requests, MPI_Fint* outcount, MPI_Fint* indices, MPI_Fint* statuses,
          MPI_Fint* ierr) {
    Statuses s(statuses, *incount);
    std::vector<int> idx(static_cast<std::size_t>(*incount > 0 ? *incount : 1));
    int n = 0;
    {
        Requests r(requests, *incount);
        *ierr = out(call(*incount, r.data(), &n, idx.data(), s.data()));
    }
    *outcount = n;
    for (int i = 0; i < n && n != MPI_UNDEFINED; ++i) {
        indices[i] = idx[static_cast<std::size_t>(i)] + 1;
    }
    if (n != MPI_UNDEFINED) {
        s.back(n);
    }
}

// Messages of carried streams taken by a matched probe have no Fortran handle in MPI's tables:
// they get negative integers of their own (MPI's are never negative) until received.
std::vector<MPI_Message> claimed_messages;

MPI_Fint message_c2f(MPI_Message m) {
    if (!pmr::mpi::Interposer::get().claimed(m)) {
        return PMPI_Message_c2f(m);
    }
    for (std::size_t i = 0; i < claimed_messages.size(); ++i) {
        if (claimed_messages[i] == MPI_MESSAGE_NULL) {
            claimed_messages[i] = m;
            return -1 - static_cast<MPI_Fint>(i);
        }
    }
    claimed_messages.push_back(m);
    return -static_cast<MPI_Fint>(claimed_messages.size());
}

/// The C handle of a Fortran message handle; a claimed one's integer is free again.
MPI_Message message_f2c(MPI_Fint f) {
    if (f >= 0) {
        return PMPI_Message_f2c(f);
    }
    const auto i = static_cast<std::size_t>(-1 - f);
    const MPI_Message m = i < claimed_messages.size() ? claimed_messages[i] : MPI_MESSAGE_NULL;
    if (i < claimed_messages.size()) {
        claimed_messages[i] = MPI_MESSAGE_NULL;
    }
    return m;
}

} // namespace

extern "C" {

void mpi_init_(MPI_Fint* ierr) {
    *ierr = out(MPI_Init(nullptr, nullptr));
}
void mpi_init_thread_(MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierr) {
    int p = 0;
    *ierr = out(MPI_Init_thread(nullptr, nullptr, *required, &p));
    *provided = p;
}
void mpi_finalize_(MPI_Fint* ierr) {
    *ierr = out(MPI_Finalize());
}

#define PMR_MPI_F_INIT(fname, cname)                                                               \
    void fname(void* buf, MPI_Fint* count, MPI_Fint* type, MPI_Fint* peer, MPI_Fint* tag,          \
               MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {                                \
        MPI_Request r = MPI_REQUEST_NULL;                                                          \
        *ierr = out(cname(buffer(buf), *count, PMPI_Type_f2c(*type), *peer, *tag,                  \
                          PMPI_Comm_f2c(*comm), &r));                                              \
        if (*ierr == MPI_SUCCESS) {                                                                \
            *request = PMPI_Request_c2f(r);                                                        \
        }                                                                                          \
    }
PMR_MPI_F_INIT(mpi_send_init_, MPI_Send_init)
PMR_MPI_F_INIT(mpi_ssend_init_, MPI_Ssend_init)
PMR_MPI_F_INIT(mpi_rsend_init_, MPI_Rsend_init)
PMR_MPI_F_INIT(mpi_bsend_init_, MPI_Bsend_init)
PMR_MPI_F_INIT(mpi_recv_init_, MPI_Recv_init)
PMR_MPI_F_INIT(mpi_isend_, MPI_Isend)
PMR_MPI_F_INIT(mpi_issend_, MPI_Issend)
PMR_MPI_F_INIT(mpi_irecv_, MPI_Irecv)
PMR_MPI_F_INIT(mpi_ibsend_, MPI_Ibsend)
PMR_MPI_F_INIT(mpi_irsend_, MPI_Irsend)
#undef PMR_MPI_F_INIT

#define PMR_MPI_F_SEND(fname, cname)                                                               \
    void fname(void* buf, MPI_Fint* count, MPI_Fint* type, MPI_Fint* dest, MPI_Fint* tag,          \
               MPI_Fint* comm, MPI_Fint* ierr) {                                                   \
        *ierr = out(                                                                               \
            cname(buffer(buf), *count, PMPI_Type_f2c(*type), *dest, *tag, PMPI_Comm_f2c(*comm)));  \
    }
PMR_MPI_F_SEND(mpi_send_, MPI_Send)
PMR_MPI_F_SEND(mpi_ssend_, MPI_Ssend)
PMR_MPI_F_SEND(mpi_rsend_, MPI_Rsend)
PMR_MPI_F_SEND(mpi_bsend_, MPI_Bsend)
#undef PMR_MPI_F_SEND

void mpi_recv_(void* buf, MPI_Fint* count, MPI_Fint* type, MPI_Fint* source, MPI_Fint* tag,
               MPI_Fint* comm, MPI_Fint* status, MPI_Fint* ierr) {
    MPI_Status c;
    *ierr = out(MPI_Recv(buffer(buf), *count, PMPI_Type_f2c(*type), *source, *tag,
                         PMPI_Comm_f2c(*comm), status_out(status, &c)));
    status_back(status, &c);
}

void mpi_sendrecv_(void* sbuf, MPI_Fint* scount, MPI_Fint* stype, MPI_Fint* dest, MPI_Fint* stag,
                   void* rbuf, MPI_Fint* rcount, MPI_Fint* rtype, MPI_Fint* source, MPI_Fint* rtag,
                   MPI_Fint* comm, MPI_Fint* status, MPI_Fint* ierr) {
    MPI_Status c;
    *ierr = out(MPI_Sendrecv(buffer(sbuf), *scount, PMPI_Type_f2c(*stype), *dest, *stag,
                             buffer(rbuf), *rcount, PMPI_Type_f2c(*rtype), *source, *rtag,
                             PMPI_Comm_f2c(*comm), status_out(status, &c)));
    status_back(status, &c);
}

void mpi_sendrecv_replace_(void* buf, MPI_Fint* count, MPI_Fint* type, MPI_Fint* dest,
                           MPI_Fint* stag, MPI_Fint* source, MPI_Fint* rtag, MPI_Fint* comm,
                           MPI_Fint* status, MPI_Fint* ierr) {
    MPI_Status c;
    *ierr = out(MPI_Sendrecv_replace(buffer(buf), *count, PMPI_Type_f2c(*type), *dest, *stag,
                                     *source, *rtag, PMPI_Comm_f2c(*comm), status_out(status, &c)));
    status_back(status, &c);
}

void mpi_start_(MPI_Fint* request, MPI_Fint* ierr) {
    MPI_Request r = PMPI_Request_f2c(*request);
    *ierr = out(MPI_Start(&r));
}

void mpi_startall_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* ierr) {
    Requests r(requests, *count);
    *ierr = out(MPI_Startall(*count, r.data()));
}

void mpi_wait_(MPI_Fint* request, MPI_Fint* status, MPI_Fint* ierr) {
    MPI_Request r = PMPI_Request_f2c(*request);
    MPI_Status c;
    *ierr = out(MPI_Wait(&r, status_out(status, &c)));
    *request = PMPI_Request_c2f(r);
    status_back(status, &c);
}

void mpi_test_(MPI_Fint* request, MPI_Fint* flag, MPI_Fint* status, MPI_Fint* ierr) {
    MPI_Request r = PMPI_Request_f2c(*request);
    MPI_Status c;
    int f = 0;
    *ierr = out(MPI_Test(&r, &f, status_out(status, &c)));
    *request = PMPI_Request_c2f(r);
    *flag = f;
    if (f != 0) {
        status_back(status, &c);
    }
}

void mpi_waitall_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* statuses, MPI_Fint* ierr) {
    Statuses s(statuses, *count);
    {
        Requests r(requests, *count);
        *ierr = out(MPI_Waitall(*count, r.data(), s.data()));
    }
    s.back(*count);
}

void mpi_testall_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* flag, MPI_Fint* statuses,
                  MPI_Fint* ierr) {
    Statuses s(statuses, *count);
    int f = 0;
    {
        Requests r(requests, *count);
        *ierr = out(MPI_Testall(*count, r.data(), &f, s.data()));
    }
    *flag = f;
    if (f != 0) {
        s.back(*count);
    }
}

void mpi_waitany_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* index, MPI_Fint* status,
                  MPI_Fint* ierr) {
    MPI_Status c;
    int i = 0;
    {
        Requests r(requests, *count);
        *ierr = out(MPI_Waitany(*count, r.data(), &i, status_out(status, &c)));
    }
    *index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
    status_back(status, &c);
}

void mpi_waitsome_(MPI_Fint* incount, MPI_Fint* requests, MPI_Fint* outcount, MPI_Fint* indices,
                   MPI_Fint* statuses, MPI_Fint* ierr) {
    some(MPI_Waitsome, incount, requests, outcount, indices, statuses, ierr);
}

void mpi_testany_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* index, MPI_Fint* flag,
                  MPI_Fint* status, MPI_Fint* ierr) {
    MPI_Status c;
    int i = 0;
    int f = 0;
    {
        Requests r(requests, *count);
        *ierr = out(MPI_Testany(*count, r.data(), &i, &f, status_out(status, &c)));
    }
    *flag = f;
    *index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
    if (f != 0) {
        status_back(status, &c);
    }
}

void mpi_testsome_(MPI_Fint* incount, MPI_Fint* requests, MPI_Fint* outcount, MPI_Fint* indices,
                   MPI_Fint* statuses, MPI_Fint* ierr) {
    some(MPI_Testsome, incount, requests, outcount, indices, statuses, ierr);
}

void mpi_request_get_status_(MPI_Fint* request, MPI_Fint* flag, MPI_Fint* status, MPI_Fint* ierr) {
    MPI_Status c;
    int f = 0;
    *ierr = out(MPI_Request_get_status(PMPI_Request_f2c(*request), &f, status_out(status, &c)));
    *flag = f;
    if (f != 0) {
        status_back(status, &c);
    }
}

void mpi_improbe_(MPI_Fint* source, MPI_Fint* tag, MPI_Fint* comm, MPI_Fint* flag,
                  MPI_Fint* message, MPI_Fint* status, MPI_Fint* ierr) {
    MPI_Status c;
    MPI_Message m = MPI_MESSAGE_NULL;
    int f = 0;
    *ierr = out(MPI_Improbe(*source, *tag, PMPI_Comm_f2c(*comm), &f, &m, status_out(status, &c)));
    *flag = f;
    if (f != 0) {
        *message = message_c2f(m);
        status_back(status, &c);
    }
}

void mpi_mprobe_(MPI_Fint* source, MPI_Fint* tag, MPI_Fint* comm, MPI_Fint* message,
                 MPI_Fint* status, MPI_Fint* ierr) {
    MPI_Status c;
    MPI_Message m = MPI_MESSAGE_NULL;
    *ierr = out(MPI_Mprobe(*source, *tag, PMPI_Comm_f2c(*comm), &m, status_out(status, &c)));
    *message = message_c2f(m);
    status_back(status, &c);
}

void mpi_mrecv_(void* buf, MPI_Fint* count, MPI_Fint* type, MPI_Fint* message, MPI_Fint* status,
                MPI_Fint* ierr) {
    MPI_Status c;
    MPI_Message m = message_f2c(*message);
    *ierr = out(MPI_Mrecv(buffer(buf), *count, PMPI_Type_f2c(*type), &m, status_out(status, &c)));
    *message = PMPI_Message_c2f(m);
    status_back(status, &c);
}

void mpi_imrecv_(void* buf, MPI_Fint* count, MPI_Fint* type, MPI_Fint* message, MPI_Fint* request,
                 MPI_Fint* ierr) {
    MPI_Message m = message_f2c(*message);
    MPI_Request r = MPI_REQUEST_NULL;
    *ierr = out(MPI_Imrecv(buffer(buf), *count, PMPI_Type_f2c(*type), &m, &r));
    *message = PMPI_Message_c2f(m);
    *request = PMPI_Request_c2f(r);
}

void mpi_type_free_(MPI_Fint* type, MPI_Fint* ierr) {
    MPI_Datatype t = PMPI_Type_f2c(*type);
    *ierr = out(MPI_Type_free(&t));
    *type = PMPI_Type_c2f(t);
}

void mpi_request_free_(MPI_Fint* request, MPI_Fint* ierr) {
    MPI_Request r = PMPI_Request_f2c(*request);
    *ierr = out(MPI_Request_free(&r));
    *request = PMPI_Request_c2f(r);
}

void mpi_cancel_(MPI_Fint* request, MPI_Fint* ierr) {
    MPI_Request r = PMPI_Request_f2c(*request);
    *ierr = out(MPI_Cancel(&r));
}

void mpi_iprobe_(MPI_Fint* source, MPI_Fint* tag, MPI_Fint* comm, MPI_Fint* flag, MPI_Fint* status,
                 MPI_Fint* ierr) {
    MPI_Status c;
    int f = 0;
    *ierr = out(MPI_Iprobe(*source, *tag, PMPI_Comm_f2c(*comm), &f, status_out(status, &c)));
    *flag = f;
    if (f != 0) {
        status_back(status, &c);
    }
}

void mpi_probe_(MPI_Fint* source, MPI_Fint* tag, MPI_Fint* comm, MPI_Fint* status, MPI_Fint* ierr) {
    MPI_Status c;
    *ierr = out(MPI_Probe(*source, *tag, PMPI_Comm_f2c(*comm), status_out(status, &c)));
    status_back(status, &c);
}

void mpi_allreduce_(void* sbuf, void* rbuf, MPI_Fint* count, MPI_Fint* type, MPI_Fint* op,
                    MPI_Fint* comm, MPI_Fint* ierr) {
    *ierr = out(MPI_Allreduce(buffer(sbuf), buffer(rbuf), *count, PMPI_Type_f2c(*type),
                              PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)));
}

void mpi_iallreduce_(void* sbuf, void* rbuf, MPI_Fint* count, MPI_Fint* type, MPI_Fint* op,
                     MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
    MPI_Request r = MPI_REQUEST_NULL;
    *ierr = out(MPI_Iallreduce(buffer(sbuf), buffer(rbuf), *count, PMPI_Type_f2c(*type),
                               PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), &r));
    *request = PMPI_Request_c2f(r);
}

void mpi_barrier_(MPI_Fint* comm, MPI_Fint* ierr) {
    *ierr = out(MPI_Barrier(PMPI_Comm_f2c(*comm)));
}

void mpi_bcast_(void* buf, MPI_Fint* count, MPI_Fint* type, MPI_Fint* root, MPI_Fint* comm,
                MPI_Fint* ierr) {
    *ierr = out(MPI_Bcast(buffer(buf), *count, PMPI_Type_f2c(*type), *root, PMPI_Comm_f2c(*comm)));
}

void mpi_comm_dup_(MPI_Fint* comm, MPI_Fint* newcomm, MPI_Fint* ierr) {
    MPI_Comm c = MPI_COMM_NULL;
    *ierr = out(MPI_Comm_dup(PMPI_Comm_f2c(*comm), &c));
    *newcomm = PMPI_Comm_c2f(c);
}

void mpi_comm_split_(MPI_Fint* comm, MPI_Fint* color, MPI_Fint* key, MPI_Fint* newcomm,
                     MPI_Fint* ierr) {
    MPI_Comm c = MPI_COMM_NULL;
    *ierr = out(MPI_Comm_split(PMPI_Comm_f2c(*comm), *color, *key, &c));
    *newcomm = PMPI_Comm_c2f(c);
}

void mpi_cart_create_(MPI_Fint* comm, MPI_Fint* ndims, MPI_Fint* dims, MPI_Fint* periods,
                      MPI_Fint* reorder, MPI_Fint* newcomm, MPI_Fint* ierr) {
    std::vector<int> d(dims, dims + *ndims);
    std::vector<int> p(static_cast<std::size_t>(*ndims));
    for (int i = 0; i < *ndims; ++i) {
        p[static_cast<std::size_t>(i)] = periods[i] != 0 ? 1 : 0; // .true. may be any non-zero
    }
    MPI_Comm c = MPI_COMM_NULL;
    *ierr = out(MPI_Cart_create(PMPI_Comm_f2c(*comm), *ndims, d.data(), p.data(),
                                *reorder != 0 ? 1 : 0, &c));
    *newcomm = PMPI_Comm_c2f(c);
}

void mpi_comm_disconnect_(MPI_Fint* comm, MPI_Fint* ierr) {
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    *ierr = out(MPI_Comm_disconnect(&c));
    *comm = PMPI_Comm_c2f(c);
}

void mpi_comm_free_(MPI_Fint* comm, MPI_Fint* ierr) {
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    *ierr = out(MPI_Comm_free(&c));
    *comm = PMPI_Comm_c2f(c);
}

} // extern "C"

#endif // OPEN_MPI
