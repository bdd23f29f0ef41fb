// SPDX-License-Identifier: MIT
#include "base/backoff.hpp"

#include <pmr/settings.hpp>

#include <algorithm>
#include <cstdlib>
#include <unistd.h>

namespace pmr::detail {
namespace {

/// Where adaptation stops when the node is not known to be oversubscribed: a wait that finds its
/// peer within this long does not pay for a yield, and it costs next to nothing otherwise.
constexpr std::int64_t floor_ns = 500;

long launcher_ranks_on_node() {
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
        if (const auto text = settings::environment(name)) {
            char* end = nullptr;
            const long value = std::strtol(text->c_str(), &end, 10);
            if (*end == '\0' && value > 0) {
                return value;
            }
        }
    }
    return 0;
}

// CPUs the ranks of this node share: the affinity mask of an unbound process, or every online CPU
// when the launcher bound each rank to a part of the node.
long cpus_for_ranks() {
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
        return online;
    }
    const long allowed = CPU_COUNT(&mask);
    return allowed < online ? online : allowed;
}

} // namespace

SpinPolicy::SpinPolicy()
    : ceiling_ns_(static_cast<std::int64_t>(settings().spin_microseconds * 1000.0)),
      fixed_(settings().spin_fixed) {
    budget_ns_.store(ceiling_ns_, std::memory_order_relaxed);
    if (const long ranks = launcher_ranks_on_node(); ranks > 0) {
        set_ranks_on_node(static_cast<int>(ranks));
    }
}

SpinPolicy& SpinPolicy::instance() {
    static SpinPolicy policy;
    return policy;
}

bool SpinPolicy::ranks_outnumber_cpus() const noexcept {
    const int ranks = ranks_on_node_.load(std::memory_order_relaxed);
    return ranks > 0 && ranks > cpus_for_ranks();
}

void SpinPolicy::set_ranks_on_node(int ranks) noexcept {
    // Counts of sub-communicators see part of the node only: the largest count is the best.
    int known = ranks_on_node_.load(std::memory_order_relaxed);
    while (ranks > known && !ranks_on_node_.compare_exchange_weak(known, ranks)) {
    }
    ranks = std::max(ranks, known);
    if (fixed_ || ranks <= 0) {
        return;
    }
    if (ranks <= cpus_for_ranks()) {
        if (!oversubscribed_.load(std::memory_order_relaxed)) {
            spin_only_.store(true, std::memory_order_relaxed);
            budget_ns_.store(ceiling_ns_, std::memory_order_relaxed);
        }
        return;
    }
    spin_only_.store(false, std::memory_order_relaxed);
    if (!oversubscribed_.exchange(true)) {
        budget_ns_.store(0, std::memory_order_relaxed);
        debug_log("waits yield at once: " + std::to_string(ranks) + " ranks on this node share " +
                  std::to_string(cpus_for_ranks()) + " CPUs");
    }
}

void SpinPolicy::futile() noexcept {
    if (fixed_) {
        return;
    }
    const std::int64_t least = oversubscribed_.load(std::memory_order_relaxed) ? 0 : floor_ns;
    const std::int64_t now = budget_ns_.load(std::memory_order_relaxed);
    budget_ns_.store(std::max(least, now / 2), std::memory_order_relaxed);
}

void SpinPolicy::fruitful() noexcept {
    if (fixed_) {
        return;
    }
    const std::int64_t now = budget_ns_.load(std::memory_order_relaxed);
    budget_ns_.store(std::min(ceiling_ns_, std::max(now * 2, floor_ns)), std::memory_order_relaxed);
}

} // namespace pmr::detail
