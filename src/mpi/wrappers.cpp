// SPDX-License-Identifier: MIT
// The MPI C functions libpmr-mpi defines over MPI's profiling interface. Each forwards to MPI
// (PMPI_*) when the interposer is off or when pmr itself is calling, and to the interposer
// otherwise. Functions not defined here are MPI's own.
#include "mpi/interposer.hpp"

#include "mpi/pmpi.hpp"

#include <pmr/error.hpp>

#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

namespace pmr::mpi {
namespace {

/// Runs `f` as the interposer: pmr's own MPI calls inside go straight to MPI. An exception
/// (pmr::PeerLost when a peer died, for one) ends the job as MPI's default error handler would.
template <class F>
int enter(F&& f) {
    inside_pmr = true;
    try {
        const int rc = f();
        inside_pmr = false;
        return rc;
    } catch (const std::exception& e) {
        inside_pmr = false;
        std::fprintf(stderr, "pmr-mpi: %s\n", e.what());
        PMPI_Abort(MPI_COMM_WORLD, 1);
        return MPI_ERR_OTHER;
    }
}

bool bypass() noexcept {
    return inside_pmr || !Interposer::get().enabled();
}

/// A communicator the program frees (or disconnects): its streams stop being followed.
void freeing(MPI_Comm comm) {
    if (!bypass()) {
        enter([comm] {
            Interposer::get().comm_freed(comm);
            return 0;
        });
    }
}

/// The usual wrapper: MPI's own function while pmr itself runs (or is off), else the interposer's.
template <class... Args, class... Params>
int forward(int (*mpi)(Params...), int (Interposer::*own)(Params...), Args... args) {
    if (bypass()) {
        return mpi(args...);
    }
    return enter([&] { return (Interposer::get().*own)(args...); });
}

void created(MPI_Comm parent, const MPI_Comm* child, int rc) {
    if (rc == MPI_SUCCESS && !bypass()) {
        enter([&] {
            Interposer::get().comm_created(parent, *child);
            return 0;
        });
    }
}

/// One side of MPI_Sendrecv: a buffer, its count and type, the peer and the tag.
template <class Buffer>
struct Half {
    Buffer buf;
    int count;
    MPI_Datatype type;
    int peer;
    int tag;
};

/// MPI_Sendrecv through the interposer: the receive and the send posted together, then waited
/// for; the status is the receive's.
int sendrecv(Half<const void*> send, Half<void*> recv, MPI_Comm comm, MPI_Status* status) {
    auto& in = Interposer::get();
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = in.irecv(recv.buf, recv.count, recv.type, recv.peer, recv.tag, comm, &r[0]);
    if (rc == MPI_SUCCESS) {
        rc = in.isend(send.buf, send.count, send.type, send.peer, send.tag, comm, 0, &r[1]);
    }
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    MPI_Status st[2];
    rc = in.waitall(2, r, st);
    if (recv.peer == MPI_PROC_NULL) {
        // MPI's status of a receive from MPI_PROC_NULL (MPICH 4.0's MPI_Test of a non-blocking
        // one reports source 0).
        set_status(&st[0], MPI_PROC_NULL, MPI_ANY_TAG, 0, false, MPI_SUCCESS);
    }
    if (status != MPI_STATUS_IGNORE) {
        *status = st[0];
    }
    return rc == MPI_ERR_IN_STATUS ? st[0].MPI_ERROR : rc;
}

} // namespace
} // namespace pmr::mpi

using pmr::mpi::bypass;
using pmr::mpi::created;
using pmr::mpi::enter;
using pmr::mpi::forward;
using pmr::mpi::freeing;
using pmr::mpi::Interposer;

extern "C" {

// Counters for tests and tools: own MPI calls of the interposer, messages it carried.
unsigned long long pmr_mpi_own_calls(void) {
    return Interposer::get().own_mpi_calls();
}
int pmr_mpi_enabled(void) {
    return Interposer::get().enabled() ? 1 : 0;
}
unsigned long long pmr_mpi_carried_messages(void) {
    return Interposer::get().carried_messages();
}

int MPI_Init(int* argc, char*** argv) {
    const int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        enter([&] {
            Interposer::get().start(provided);
            return 0;
        });
    }
    return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
    const int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) {
        const int level = *provided;
        enter([&] {
            Interposer::get().start(level);
            return 0;
        });
    }
    return rc;
}

int MPI_Finalize(void) {
    enter([] {
        Interposer::get().finish();
        return 0;
    });
    return PMPI_Finalize();
}

// Communicators: children of known communicators get an identifier every member agrees on.
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
    const int rc = PMPI_Comm_dup(comm, newcomm);
    created(comm, newcomm, rc);
    return rc;
}
int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
    const int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);
    created(comm, newcomm, rc);
    return rc;
}
int MPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request) {
    const int rc = PMPI_Comm_idup(comm, newcomm, request);
    created(comm, newcomm, rc);
    return rc;
}
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
    const int rc = PMPI_Comm_split(comm, color, key, newcomm);
    created(comm, newcomm, rc);
    return rc;
}
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* newcomm) {
    const int rc = PMPI_Comm_split_type(comm, type, key, info, newcomm);
    created(comm, newcomm, rc);
    return rc;
}
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
    const int rc = PMPI_Comm_create(comm, group, newcomm);
    created(comm, newcomm, rc);
    return rc;
}
int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm* newcomm) {
    const int rc = PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm);
    created(comm, newcomm, rc);
    return rc;
}
int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
    const int rc = PMPI_Cart_sub(comm, remain_dims, newcomm);
    created(comm, newcomm, rc);
    return rc;
}
int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder,
                     MPI_Comm* newcomm) {
    const int rc = PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm);
    created(comm, newcomm, rc);
    return rc;
}
int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm* newcomm) {
    const int rc =
        PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree,
                                        destinations, destweights, info, reorder, newcomm);
    created(comm, newcomm, rc);
    return rc;
}
int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[],
                          const int destinations[], const int weights[], MPI_Info info, int reorder,
                          MPI_Comm* newcomm) {
    const int rc = PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info,
                                          reorder, newcomm);
    created(comm, newcomm, rc);
    return rc;
}
// Communicators the interposer does not follow: their handles are unknown to it from now on.
#define PMR_MPI_UNKNOWN_CHILD(call_expression, child)                                              \
    const int rc = call_expression;                                                                \
    if (rc == MPI_SUCCESS && !bypass()) {                                                          \
        MPI_Comm c = *(child);                                                                     \
        enter([c] {                                                                                \
            Interposer::get().comm_unknown(c);                                                     \
            return 0;                                                                              \
        });                                                                                        \
    }                                                                                              \
    return rc;
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
    PMR_MPI_UNKNOWN_CHILD(PMPI_Comm_create_group(comm, group, tag, newcomm), newcomm)
}
int MPI_Intercomm_create(MPI_Comm local, int local_leader, MPI_Comm peer, int remote_leader,
                         int tag, MPI_Comm* newcomm) {
    PMR_MPI_UNKNOWN_CHILD(
        PMPI_Intercomm_create(local, local_leader, peer, remote_leader, tag, newcomm), newcomm)
}
int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newcomm) {
    PMR_MPI_UNKNOWN_CHILD(PMPI_Intercomm_merge(intercomm, high, newcomm), newcomm)
}
#undef PMR_MPI_UNKNOWN_CHILD
int MPI_Comm_disconnect(MPI_Comm* comm) {
    freeing(*comm);
    return PMPI_Comm_disconnect(comm);
}
int MPI_Comm_free(MPI_Comm* comm) {
    freeing(*comm);
    return PMPI_Comm_free(comm);
}
int MPI_Type_free(MPI_Datatype* type) {
    if (!bypass()) {
        MPI_Datatype t = *type;
        enter([t] {
            Interposer::get().type_freed(t);
            return 0;
        });
    }
    return PMPI_Type_free(type);
}

// Sends.
#define PMR_MPI_SEND(name, mode)                                                                   \
    int name(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {    \
        if (bypass()) {                                                                            \
            return P##name(buf, count, type, dest, tag, comm);                                     \
        }                                                                                          \
        return enter(                                                                              \
            [&] { return Interposer::get().send(buf, count, type, dest, tag, comm, mode); });      \
    }
PMR_MPI_SEND(MPI_Send, 0)
PMR_MPI_SEND(MPI_Ssend, 1)
PMR_MPI_SEND(MPI_Rsend, 2)
PMR_MPI_SEND(MPI_Bsend, 3)
#undef PMR_MPI_SEND

#define PMR_MPI_ISEND(name, mode, interposer_call)                                                 \
    int name(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,      \
             MPI_Request* request) {                                                               \
        if (bypass()) {                                                                            \
            return P##name(buf, count, type, dest, tag, comm, request);                            \
        }                                                                                          \
        return enter([&] {                                                                         \
            return Interposer::get().interposer_call(buf, count, type, dest, tag, comm, mode,      \
                                                     request);                                     \
        });                                                                                        \
    }
int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
    if (bypass() || Interposer::get().counted_send(comm, dest, tag)) {
        return PMPI_Isend(buf, count, type, dest, tag, comm, request);
    }
    return enter(
        [&] { return Interposer::get().isend(buf, count, type, dest, tag, comm, 0, request); });
}
PMR_MPI_ISEND(MPI_Issend, 1, isend)
PMR_MPI_ISEND(MPI_Irsend, 2, isend)
PMR_MPI_ISEND(MPI_Ibsend, 3, isend)
PMR_MPI_ISEND(MPI_Send_init, 0, send_init)
PMR_MPI_ISEND(MPI_Ssend_init, 1, send_init)
PMR_MPI_ISEND(MPI_Rsend_init, 2, send_init)
PMR_MPI_ISEND(MPI_Bsend_init, 3, send_init)
#undef PMR_MPI_ISEND

// Receives.
int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status* status) {
    return forward(PMPI_Recv, &Interposer::recv, buf, count, type, source, tag, comm, status);
}
int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
    if (!bypass() && Interposer::get().counted_receive(comm, source, tag, count, type)) {
        return PMPI_Irecv(buf, count, type, source, tag, comm, request);
    }
    return forward(PMPI_Irecv, &Interposer::irecv, buf, count, type, source, tag, comm, request);
}
int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                  MPI_Request* request) {
    return forward(PMPI_Recv_init, &Interposer::recv_init, buf, count, type, source, tag, comm,
                   request);
}

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status) {
    if (bypass() || Interposer::get().find(comm) == nullptr) {
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                             recvtype, source, recvtag, comm, status);
    }
    return enter([&] {
        return pmr::mpi::sendrecv({sendbuf, sendcount, sendtype, dest, sendtag},
                                  {recvbuf, recvcount, recvtype, source, recvtag}, comm, status);
    });
}

int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                         int recvtag, MPI_Comm comm, MPI_Status* status) {
    if (bypass() || Interposer::get().find(comm) == nullptr) {
        return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm,
                                     status);
    }
    return enter([&] {
        // The outgoing data packed aside, so that the receive may overwrite the buffer.
        int bound = 0;
        PMPI_Pack_size(count, type, comm, &bound);
        std::vector<char> packed(static_cast<std::size_t>(bound));
        int position = 0;
        PMPI_Pack(buf, count, type, packed.data(), bound, &position, comm);
        return pmr::mpi::sendrecv({packed.data(), position, MPI_PACKED, dest, sendtag},
                                  {buf, count, type, source, recvtag}, comm, status);
    });
}

// Requests.
int MPI_Start(MPI_Request* request) {
    return forward(PMPI_Start, &Interposer::start, request);
}
int MPI_Startall(int count, MPI_Request requests[]) {
    return forward(PMPI_Startall, &Interposer::startall, count, requests);
}
int MPI_Wait(MPI_Request* request, MPI_Status* status) {
    return forward(PMPI_Wait, &Interposer::wait, request, status);
}
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
    return forward(PMPI_Test, &Interposer::test, request, flag, status);
}
int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
    return forward(PMPI_Waitall, &Interposer::waitall, count, requests, statuses);
}
int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
    return forward(PMPI_Testall, &Interposer::testall, count, requests, flag, statuses);
}
int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
    return forward(PMPI_Waitany, &Interposer::waitany, count, requests, index, status);
}
int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
    return forward(PMPI_Testany, &Interposer::testany, count, requests, index, flag, status);
}
int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
    return forward(PMPI_Waitsome, &Interposer::waitsome, incount, requests, outcount, indices,
                   statuses);
}
int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
    return forward(PMPI_Testsome, &Interposer::testsome, incount, requests, outcount, indices,
                   statuses);
}
int MPI_Request_free(MPI_Request* request) {
    return forward(PMPI_Request_free, &Interposer::request_free, request);
}
int MPI_Cancel(MPI_Request* request) {
    return forward(PMPI_Cancel, &Interposer::cancel, request);
}
int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
    return forward(PMPI_Request_get_status, &Interposer::request_get_status, request, flag, status);
}

// Probes.
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
    return forward(PMPI_Iprobe, &Interposer::iprobe, source, tag, comm, flag, status);
}
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
    return forward(PMPI_Probe, &Interposer::probe, source, tag, comm, status);
}
int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                MPI_Status* status) {
    return forward(PMPI_Improbe, &Interposer::improbe, source, tag, comm, flag, message, status);
}
int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
    return forward(PMPI_Mprobe, &Interposer::mprobe, source, tag, comm, message, status);
}
int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
    return forward(PMPI_Mrecv, &Interposer::mrecv, buf, count, type, message, status);
}
int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message,
               MPI_Request* request) {
    return forward(PMPI_Imrecv, &Interposer::imrecv, buf, count, type, message, request);
}

// Collectives.
int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
    return forward(PMPI_Allreduce, &Interposer::allreduce, sendbuf, recvbuf, count, type, op, comm);
}
int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
    return forward(PMPI_Iallreduce, &Interposer::iallreduce, sendbuf, recvbuf, count, type, op,
                   comm, request);
}
int MPI_Barrier(MPI_Comm comm) {
    return forward(PMPI_Barrier, &Interposer::barrier, comm);
}
int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    return forward(PMPI_Bcast, &Interposer::bcast, buf, count, type, root, comm);
}

} // extern "C"
