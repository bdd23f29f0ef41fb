// SPDX-License-Identifier: MIT
// Misuse the type system must reject. Each PMR_CASE_<n> is compiled on its own by CTest and is
// expected to fail; PMR_CASE_NONE must compile, proving the failures come from the misuse alone.
#include <pmr/pmr.hpp>

#include <string>

void misuse(pmr::Connection& connection) {
#if defined(PMR_CASE_NONE)
    pmr::SendWindow<double> send(connection, 4);
    send.post(pmr::Elements{2});
    send.post({pmr::RailSlice{0, 1, 0}, pmr::RailSlice{1, 1, 0}});
    pmr::RecvWindow<double> recv(connection, 4);
    recv.post();
    (void)recv.received_bytes();
#elif defined(PMR_CASE_NOT_TRIVIALLY_COPYABLE)
    pmr::SendWindow<std::string> send(connection, 4); // bytes of a std::string are not the string
#elif defined(PMR_CASE_COPY_CONNECTION)
    pmr::Connection copy = connection; // a connection is a unique resource
    (void)copy;
#elif defined(PMR_CASE_COPY_WINDOW)
    pmr::SendWindow<double> send(connection, 4);
    pmr::SendWindow<double> copy = send;
#elif defined(PMR_CASE_RECV_PARTIAL_POST)
    pmr::RecvWindow<double> recv(connection, 4);
    recv.post(pmr::Elements{2}); // only senders choose how many elements to send
#elif defined(PMR_CASE_SEND_RECEIVED_BYTES)
    pmr::SendWindow<double> send(connection, 4);
    (void)send.received_bytes();
#elif defined(PMR_CASE_BYTE_COUNT_POST)
    pmr::SendWindow<double> send(connection, 4);
    send.post(std::size_t{16}); // deprecated: counts bytes (an error with the flags of this test)
#elif defined(PMR_CASE_PLAIN_COUNT_POST)
    pmr::SendWindow<double> send(connection, 4);
    pmr::Elements two = 2; // a plain number is no element count: write pmr::Elements{2}
    send.post(two);
#elif defined(PMR_CASE_BRACED_RAIL_PIECES)
    pmr::SendWindow<double> send(connection, 4);
    send.post({{0, 2, 0}}); // bytes or elements? Ambiguous: name pmr::RailSlice
#else
#error "define one PMR_CASE_*"
#endif
}
