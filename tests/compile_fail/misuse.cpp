// SPDX-License-Identifier: MIT
// Misuse the type system must reject. Each PMR_CASE_<n> is compiled on its own by CTest and is
// expected to fail; PMR_CASE_NONE must compile, proving the failures come from the misuse alone.
#include <pmr/pmr.hpp>

#include <string>

void misuse(pmr::Connection& connection) {
#if defined(PMR_CASE_NONE)
    pmr::SendWindow<double> send(connection, 4);
    send.post(8);
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
    recv.post(8); // only senders choose how many bytes to send
#elif defined(PMR_CASE_SEND_RECEIVED_BYTES)
    pmr::SendWindow<double> send(connection, 4);
    (void)send.received_bytes();
#else
#error "define one PMR_CASE_*"
#endif
}
