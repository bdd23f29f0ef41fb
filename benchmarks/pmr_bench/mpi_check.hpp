// SPDX-License-Identifier: MIT
/// @file mpi_check.hpp
/// MPI return codes turned into exceptions, and a communicator duplicate that frees itself.
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace pmr_bench {

/// Throws std::runtime_error naming `what` if an MPI call failed. MPI's default handler aborts
/// first; this matters for communicators where a baseline sets MPI_ERRORS_RETURN.
inline void check_mpi(int status, const char* what) {
    if (status == MPI_SUCCESS) {
        return;
    }
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(status, text, &length);
    throw std::runtime_error(std::string("pmr-bench: ") + what +
                             " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

/// MPI_Comm_dup of a communicator (keeps a Cartesian topology), freed on destruction. Each
/// baseline gets its own so that its tags can never match another variant's messages or pmr's
/// set-up traffic.
class DupComm {
public:
    explicit DupComm(MPI_Comm comm) { check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup"); }
    DupComm(const DupComm&) = delete;
    DupComm& operator=(const DupComm&) = delete;
    DupComm(DupComm&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}
    DupComm& operator=(DupComm&& other) noexcept {
        std::swap(comm_, other.comm_);
        return *this;
    }
    ~DupComm() {
        if (comm_ != MPI_COMM_NULL) {
            MPI_Comm_free(&comm_);
        }
    }
    MPI_Comm get() const noexcept { return comm_; }

private:
    MPI_Comm comm_ = MPI_COMM_NULL;
};

} // namespace pmr_bench
