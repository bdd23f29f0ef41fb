// SPDX-License-Identifier: MIT
// pmr.h is valid C++ and lives next to the C++ API in one program, and both compile in a code built
// with -DMPI (as many codes switch their MPI parts on): pmr keeps MPI's C++ bindings out, which
// would otherwise declare `namespace MPI`. One process, a connection to itself through each API;
// and every exception a C function body may throw maps to its code and message.
#include <pmr/pmr.h>
#include <pmr/pmr.hpp>

#include "capi/internal.h"

#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>

#ifndef MPI
#error "this test is meant to be compiled with -DMPI"
#endif

namespace {

template <class E>
void throw_error(void* /*context*/) {
    throw E("pmr: thrown by the test.");
}

void throw_bad_alloc(void* /*context*/) {
    throw std::bad_alloc();
}

void throw_int(void* /*context*/) {
    throw 42; // NOLINT(hicpp-exception-baseclass): what no C caller may see escape
}

void return_normally(void* context) {
    *static_cast<int*>(context) = 1;
}

/// `body` under the C functions' exception mapping gives `code` and a last error holding `text`.
bool maps_to(void (*body)(void*), int code, const char* text) {
    const int rc = pmr_capi_run_guarded("pmr_test_function", body, nullptr);
    const bool ok = rc == code && std::strstr(pmr_last_error(), text) != nullptr;
    if (!ok) {
        std::printf("FAILED: %s (%d, \"%s\"), expected %s with \"%s\"\n", pmr_error_name(rc), rc,
                    pmr_last_error(), pmr_error_name(code), text);
    }
    return ok;
}

/// Every code an exception maps to, also those no correct call provokes on purpose
/// (PMR_ERR_OTHER), with its message.
bool exceptions_map_to_codes() {
    int ran = 0;
    bool ok =
        pmr_capi_run_guarded("pmr_test_function", return_normally, &ran) == PMR_SUCCESS && ran == 1;
    ok &= maps_to(throw_error<pmr::UsageError>, PMR_ERR_USAGE, "thrown by the test");
    ok &= maps_to(throw_error<pmr::ArgumentError>, PMR_ERR_ARGUMENT, "thrown by the test");
    ok &= maps_to(throw_error<pmr::SizeError>, PMR_ERR_SIZE, "thrown by the test");
    ok &= maps_to(throw_error<pmr::ProviderError>, PMR_ERR_PROVIDER, "thrown by the test");
    ok &= maps_to(throw_error<pmr::ResourceError>, PMR_ERR_NO_MEMORY, "thrown by the test");
    ok &= maps_to(throw_error<pmr::BootstrapError>, PMR_ERR_BOOTSTRAP, "thrown by the test");
    ok &= maps_to(throw_error<pmr::Timeout>, PMR_ERR_TIMEOUT, "thrown by the test");
    ok &= maps_to(throw_error<pmr::PeerLost>, PMR_ERR_PEER_LOST, "thrown by the test");
    ok &= maps_to(throw_bad_alloc, PMR_ERR_NO_MEMORY, "out of memory [pmr_test_function]");
    ok &= maps_to(throw_error<pmr::Error>, PMR_ERR_OTHER, "thrown by the test");
    ok &= maps_to(throw_error<std::logic_error>, PMR_ERR_OTHER, "thrown by the test");
    ok &= maps_to(throw_int, PMR_ERR_OTHER, "unknown exception");
    return ok;
}

} // namespace

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
    ok = exceptions_map_to_codes() && ok;
    pmr_send_window_destroy(&s);
    pmr_recv_window_destroy(&r);
    pmr_connection_destroy(&c);
    std::printf("test_capi_cxx: %s\n", ok ? "passed" : "FAILED");
    MPI_Finalize();
    return ok ? 0 : 1;
}
