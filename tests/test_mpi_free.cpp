// SPDX-License-Identifier: MIT
// The data path never calls MPI. Every MPI function pmr uses is intercepted here through the MPI
// profiling interface (the executable's definitions take precedence over libmpi's for libpmr too)
// and counted; the steady state of a halo exchange must count zero.
#include <catch2/catch.hpp>

#include <pmr/pmr.hpp>

#include <atomic>
#include <thread>
#include <vector>

namespace {
std::atomic<long> mpi_calls{0};
thread_local long mpi_calls_here = 0; // by the calling thread

void count_call() {
    ++mpi_calls;
    ++mpi_calls_here;
}
} // namespace

// Every MPI function libpmr links, one interceptor each. The test test_mpi_free.intercepts
// (tests/mpi_free_intercepts.cmake) compares this list with libpmr's undefined MPI_ symbols and
// fails when libpmr starts calling one that is missing here.
extern "C" {
int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    count_call();
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}
int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm* cart) {
    count_call();
    return PMPI_Cart_create(comm, ndims, dims, periods, reorder, cart);
}
int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
    count_call();
    return PMPI_Cart_get(comm, maxdims, dims, periods, coords);
}
int MPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank) {
    count_call();
    return PMPI_Cart_rank(comm, coords, rank);
}
int MPI_Cartdim_get(MPI_Comm comm, int* ndims) {
    count_call();
    return PMPI_Cartdim_get(comm, ndims);
}
int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* copy, MPI_Comm_delete_attr_function* del,
                           int* keyval, void* extra_state) {
    count_call();
    return PMPI_Comm_create_keyval(copy, del, keyval, extra_state);
}
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* copy) {
    count_call();
    return PMPI_Comm_dup(comm, copy);
}
int MPI_Comm_free(MPI_Comm* comm) {
    count_call();
    return PMPI_Comm_free(comm);
}
int MPI_Comm_get_attr(MPI_Comm comm, int key, void* value, int* flag) {
    count_call();
    return PMPI_Comm_get_attr(comm, key, value, flag);
}
int MPI_Comm_group(MPI_Comm comm, MPI_Group* group) {
    count_call();
    return PMPI_Comm_group(comm, group);
}
int MPI_Comm_rank(MPI_Comm comm, int* rank) {
    count_call();
    return PMPI_Comm_rank(comm, rank);
}
int MPI_Comm_set_attr(MPI_Comm comm, int key, void* value) {
    count_call();
    return PMPI_Comm_set_attr(comm, key, value);
}
int MPI_Comm_size(MPI_Comm comm, int* size) {
    count_call();
    return PMPI_Comm_size(comm, size);
}
int MPI_Dims_create(int nodes, int ndims, int dims[]) {
    count_call();
    return PMPI_Dims_create(nodes, ndims, dims);
}
int MPI_Error_string(int code, char* text, int* length) {
    count_call();
    return PMPI_Error_string(code, text, length);
}
int MPI_Finalized(int* flag) {
    count_call();
    return PMPI_Finalized(flag);
}
int MPI_Get_count(const MPI_Status* status, MPI_Datatype type, int* count) {
    count_call();
    return PMPI_Get_count(status, type, count);
}
int MPI_Group_free(MPI_Group* group) {
    count_call();
    return PMPI_Group_free(group);
}
int MPI_Group_translate_ranks(MPI_Group group, int n, const int ranks[], MPI_Group other,
                              int other_ranks[]) {
    count_call();
    return PMPI_Group_translate_ranks(group, n, ranks, other, other_ranks);
}
int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                MPI_Status* status) {
    count_call();
    return PMPI_Improbe(source, tag, comm, flag, message, status);
}
int MPI_Initialized(int* flag) {
    count_call();
    return PMPI_Initialized(flag);
}
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
    count_call();
    return PMPI_Iprobe(source, tag, comm, flag, status);
}
int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
    count_call();
    return PMPI_Isend(buf, count, type, dest, tag, comm, request);
}
int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
    count_call();
    return PMPI_Mrecv(buf, count, type, message, status);
}
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
    count_call();
    return PMPI_Test(request, flag, status);
}
int MPI_Topo_test(MPI_Comm comm, int* status) {
    count_call();
    return PMPI_Topo_test(comm, status);
}
}

TEST_CASE("init, post, wait and test never call MPI", "[mpi-free]") {
    int rank = 0;
    int size = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);

    mpi_calls = 0;
    pmr::Communicator cart(MPI_COMM_WORLD, {size}, {true});
    std::vector<pmr::Connection> connections;
    connections.emplace_back(cart.target(0, -1));
    connections.emplace_back(cart.target(0, +1));
    std::vector<pmr::SendWindow<double>> sends;
    std::vector<pmr::RecvWindow<double>> recvs;
    std::vector<double> user(1 << 16);
    for (auto& c : connections) {
        sends.emplace_back(c, 1 << 16);        // library-owned, above the inline size
        sends.emplace_back(c, user.data(), 4); // user buffer, inline
        recvs.emplace_back(c, user.size());
        recvs.emplace_back(c, 4);
    }
    auto round = [&] {
        for (auto& r : recvs) {
            r.init();
        }
        for (auto& s : sends) {
            s.init();
        }
        for (auto& s : sends) {
            s.post();
        }
        for (auto& r : recvs) {
            r.post();
        }
        for (auto& s : sends) {
            while (!s.test()) {
            }
        }
        for (auto& r : recvs) {
            r.wait();
        }
    };
    round(); // the first round completes the set-up, which does use MPI
    const long setup_calls = mpi_calls.exchange(0);
    CHECK(setup_calls > 0); // the interception works
    // Until every set-up message has left, waits may progress them (the documented exception):
    // after the barrier nothing is in flight any more.
    MPI_Barrier(MPI_COMM_WORLD);
    round();
    mpi_calls = 0;

    for (int i = 0; i < 500; ++i) {
        round();
    }
    CHECK(mpi_calls.load() == 0);
}

TEST_CASE("the neighbour exchange's start, wait and test never call MPI", "[mpi-free][neighbor]") {
    int size = 0;
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    pmr::Communicator cart(MPI_COMM_WORLD, {size, 1}, {true, false});
    std::vector<double> user_send(std::size_t{3} * 5000);
    std::vector<double> user_recv(std::size_t{3} * 5000);
    std::vector<double*> sends;
    std::vector<double*> recvs;
    for (std::size_t i = 0; i < 4; ++i) {
        sends.push_back(user_send.data() + 3000 * i);
        recvs.push_back(user_recv.data() + 3000 * i);
    }
    for (auto algorithm : {pmr::NeighborAlgorithm::direct, pmr::NeighborAlgorithm::split,
                           pmr::NeighborAlgorithm::automatic}) {
        INFO(pmr::to_string(algorithm));
        pmr::NeighborOptions options;
        options.algorithm = algorithm;
        options.min_fragment_bytes = 1;
        pmr::NeighborExchange<double> owned(cart, 1 << 14, options);
        pmr::NeighborExchange<double> user(cart, 3000, sends, recvs, options);
        owned.start();
        user.start();
        owned.wait();
        user.wait();
        MPI_Barrier(MPI_COMM_WORLD); // no set-up message in flight any more
        mpi_calls = 0;
        for (int i = 0; i < 200; ++i) {
            owned.start();
            user.start();
            owned.wait();
            while (!user.test()) {
            }
        }
        CHECK(mpi_calls.load() == 0);
    }
}

TEST_CASE("a worker thread's data path makes no MPI call while the main thread sets up",
          "[mpi-free][threads]") {
    // The contract under MPI_THREAD_FUNNELED: only the thread that makes the set-up calls calls
    // MPI, also while set-up messages are in flight and another thread waits in the data path.
    int rank = 0;
    int size = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    const int peer = size == 2 ? 1 - rank : rank;
    pmr::Connection busy(pmr::Target(MPI_COMM_WORLD, peer, 20, 20));
    pmr::SendWindow<double> send(busy, 1000);
    pmr::RecvWindow<double> recv(busy, 1000);
    auto round = [&] {
        recv.init();
        send.init();
        send.post();
        recv.post();
        send.wait();
        recv.wait();
    };
    round(); // set up on the main thread
    long worker_calls = -1;
    std::thread worker([&] {
        mpi_calls_here = 0;
        for (int i = 0; i < 3000; ++i) {
            round();
        }
        worker_calls = mpi_calls_here;
    });
    // Meanwhile: new connections and windows, whose set-up messages are in flight.
    for (int k = 0; k < 20; ++k) {
        pmr::Connection fresh(pmr::Target(MPI_COMM_WORLD, peer, 30 + k, 30 + k));
        pmr::SendWindow<int> s(fresh, 100);
        pmr::RecvWindow<int> r(fresh, 100);
        r.init();
        s.init();
        s.post();
        r.post();
        s.wait();
        r.wait();
    }
    worker.join();
    CHECK(worker_calls == 0);
}

TEST_CASE("collectives: start, test and wait never call MPI", "[mpi-free][collectives]") {
    int size = 0;
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    mpi_calls = 0;
    pmr::Communicator comm(MPI_COMM_WORLD);
    using Algorithm = pmr::AllreduceAlgorithm;
    using Order = pmr::ReductionOrder;
    std::vector<pmr::Allreduce<double>> reductions;
    // direct: 1 element whole in one step, 1 << 13 in chunks (in-place windows); automatic picks
    // it on one node.
    for (auto algorithm : {Algorithm::recursive_doubling, Algorithm::ring, Algorithm::direct,
                           Algorithm::automatic}) {
        for (auto order : {Order::algorithm, Order::rank}) {
            reductions.emplace_back(comm, 1, pmr::ReduceOp::sum,
                                    pmr::AllreduceOptions{algorithm, order});
            reductions.emplace_back(comm, 1 << 13, pmr::ReduceOp::max,
                                    pmr::AllreduceOptions{algorithm, order});
        }
    }
    pmr::Barrier barrier(comm);
    pmr::Broadcast<int> broadcast(comm, 1000, size - 1);
    pmr::Allgather<float> gather(comm, 100);
    const long setup_calls = mpi_calls.exchange(0);
    CHECK(setup_calls > 0); // construction agrees on the arguments with MPI
    // As above: set-up messages still in flight may be progressed by waits until the barrier.
    MPI_Barrier(MPI_COMM_WORLD);
    auto round = [&] {
        for (auto& r : reductions) {
            r[0] = 1.0;
            r.start();
            while (!r.test()) {
            }
        }
        barrier();
        broadcast();
        gather();
    };
    round();
    mpi_calls = 0;
    for (int i = 0; i < 50; ++i) {
        round();
        reductions[0][0] = 1.0;
        reductions[0]();
        CHECK(reductions[0][0] == static_cast<double>(size));
    }
    CHECK(mpi_calls.load() == 0);
}
