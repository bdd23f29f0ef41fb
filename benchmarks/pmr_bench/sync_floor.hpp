// SPDX-License-Identifier: MIT
/// @file sync_floor.hpp
/// The reference `sync-floor` of the collective benchmarks: the least any collective among the
/// ranks of one node can cost on this machine. Every rank stores its round number in a cache
/// line of its own in memory all ranks share and waits until every rank's line holds it; no
/// data, no reduction, no protocol. It waits as pmr does: spinning while every rank has a CPU,
/// yielding the CPU at every look when the ranks outnumber the CPUs. An allreduce or a barrier
/// has to make every rank hear from every other at least once per round, so its time over this
/// line is what is left to gain; where the line itself is close to a target (half of
/// MPI_Allreduce's time, say), no implementation can reach it on this machine.
#pragma once

#include "benchmark.hpp"

#include <memory>

namespace pmr_bench {

/// The sync-floor variant, or nullptr when the ranks span several nodes (no memory they all
/// share). Collective over `context.world`.
std::unique_ptr<Variant> make_sync_floor(const Context& context);

} // namespace pmr_bench
