// SPDX-License-Identifier: MIT
// The interposer's own MPI calls, counted, and MPI_Status written without an MPI call.
#pragma once

#include "mpi/interposer.hpp"

#include <mpi.h>

#include <cstddef>

namespace pmr::mpi {

/// `call(PMPI_Test)(args...)`: an MPI call the interposer makes on its own behalf (set-up,
/// control messages, matching deferred receives); the application's own calls forwarded to MPI
/// are not counted.
template <class F>
F* call(F* function) noexcept {
    Interposer::get().count_mpi_call();
    return function;
}

/// Fills a status as MPI would for `bytes` bytes from `source` with `tag`.
inline void set_status(MPI_Status* status, int source, int tag, std::size_t bytes, bool cancelled,
                       int error) {
    if (status == MPI_STATUS_IGNORE) {
        return;
    }
    status->MPI_SOURCE = source;
    status->MPI_TAG = tag;
    status->MPI_ERROR = error;
#if defined(OPEN_MPI)
    status->_ucount = bytes;
    status->_cancelled = cancelled ? 1 : 0;
#elif defined(MPICH)
    // MPICH keeps the low 32 bits in count_lo and the rest above the cancelled bit.
    status->count_lo = static_cast<int>(static_cast<unsigned>(bytes & 0xffffffffU));
    status->count_hi_and_cancelled =
        static_cast<int>((static_cast<unsigned long long>(bytes) >> 32) << 1) | (cancelled ? 1 : 0);
#else
    PMPI_Status_set_elements_x(status, MPI_BYTE, static_cast<MPI_Count>(bytes));
    PMPI_Status_set_cancelled(status, cancelled ? 1 : 0);
#endif
}

} // namespace pmr::mpi
