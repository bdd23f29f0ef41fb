// SPDX-License-Identifier: MIT
/// @file windows_command.hpp
/// `pmr-bench windows`: what setting windows up costs. Every even rank and the next odd one create
/// window pairs on one or more connections, use each once, and destroy them; rank 0 prints the
/// pace (pairs per second created, first used, destroyed) and the resources per pair (descriptors,
/// mappings, bytes of the shared-memory arena) that the pairs added to each process.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pmr_bench {

/// Parses `words` (the options after "windows"), measures and prints to `out` on rank 0; returns
/// the exit status. Collective over MPI_COMM_WORLD (MPI initialised); even rank counts only.
int run_windows_command(const std::vector<std::string>& words, std::ostream& out);

} // namespace pmr_bench
