// SPDX-License-Identifier: MIT
// pmr.h is valid C++ and lives next to the C++ API in one program, and both compile in a code built
// with -DMPI (as many codes switch their MPI parts on): pmr keeps MPI's C++ bindings out, which
// would otherwise declare `namespace MPI`. One process, a connection to itself through each API.
#include <pmr/pmr.h>
#include <pmr/pmr.hpp>

#include <mpi.h>

#include <cstdio>
#include <cstring>

#ifndef MPI
#error "this test is meant to be compiled with -DMPI"
#endif

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    bool ok = true;
    {
        pmr::Connection cxx(pmr::Target(MPI_COMM_WORLD, rank, 5, 5));
        pmr::SendWindow<int> send(cxx, 4);
        pmr::RecvWindow<int> recv(cxx, 4);
        send[0] = 17;
        recv.init();
        send.init();
        send.post();
        recv.post();
        send.wait();
        recv.wait();
        ok = ok && recv[0] == 17;
    }
    pmr_connection c = nullptr;
    pmr_send_window s = nullptr;
    pmr_recv_window r = nullptr;
    int out = 23;
    int in = 0;
    ok = ok && pmr_connection_create(MPI_COMM_WORLD, rank, 6, 6, &c) == PMR_SUCCESS &&
         pmr_send_window_create(c, &out, sizeof out, &s) == PMR_SUCCESS &&
         pmr_recv_window_create(c, &in, sizeof in, &r) == PMR_SUCCESS &&
         pmr_recv_window_init(r) == PMR_SUCCESS && pmr_send_window_init(s) == PMR_SUCCESS &&
         pmr_send_window_post(s, sizeof out) == PMR_SUCCESS &&
         pmr_recv_window_post(r) == PMR_SUCCESS && pmr_send_window_wait(s) == PMR_SUCCESS &&
         pmr_recv_window_wait(r) == PMR_SUCCESS && in == 23;
    // A C++ exception inside the library becomes a code, not an escape through the C frames.
    ok = ok && pmr_send_window_post(s, 1000) == PMR_ERR_USAGE &&
         std::strstr(pmr_last_error(), "before init()") != nullptr;
    pmr_send_window_destroy(&s);
    pmr_recv_window_destroy(&r);
    pmr_connection_destroy(&c);
    std::printf("test_capi_cxx: %s\n", ok ? "passed" : "FAILED");
    MPI_Finalize();
    return ok ? 0 : 1;
}
