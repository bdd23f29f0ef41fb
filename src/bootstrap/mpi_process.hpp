// SPDX-License-Identifier: MIT
// The MPI process pmr runs in: whether MPI is active, this process's place in MPI_COMM_WORLD, the
// tags left to the application, and a hook at MPI_Finalize.
#pragma once

#include <string>

namespace pmr::detail::bootstrap {

/// Calls `hook` at the start of MPI_Finalize (through an attribute of MPI_COMM_SELF, whose delete
/// callbacks MPI runs first), once, however often this is called. The core ends every live window
/// there, so that a peer waiting on one learns it instead of waiting for a process that is gone
/// into MPI_Finalize.
/// @throws BootstrapError if MPI fails.
void at_finalize(void (*hook)() noexcept);

/// Largest user tag pmr accepts (MPI_TAG_UB / 2).
int max_user_tag();
/// Whether MPI is initialised and not finalised.
bool mpi_active() noexcept;
/// What every pmr object checks first: reads the settings (so that malformed PMR_* variables are
/// reported by the first pmr object, not later inside a data-path call that cannot throw), then
/// that MPI is active. @throws BootstrapError naming `where` if it is not.
void require_mpi(const std::string& where);
/// This process's rank in MPI_COMM_WORLD and its size (0 of 1 while MPI is not active).
void world_position(int& rank, int& size) noexcept;

} // namespace pmr::detail::bootstrap
