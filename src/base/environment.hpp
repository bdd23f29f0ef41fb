// SPDX-License-Identifier: MIT
// Settings read once from the environment (PMR_*).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace pmr::detail {

struct Settings {
    /// PMR_TIMEOUT: seconds a wait may take before it throws pmr::Timeout; 0 waits forever.
    double timeout_seconds = 0.0;
    /// PMR_PROVIDER: provider forced for inter-process connections (raw text, validated later).
    std::optional<std::string> provider;
    /// PMR_SPIN_US: microseconds a wait spins before it starts yielding the core (the ceiling of
    /// the adaptive budget, see backoff.hpp).
    double spin_microseconds = 20.0;
    /// Whether PMR_SPIN_US was set, which fixes the budget.
    bool spin_fixed = false;
    /// PMR_SHM_CMA: 0 disables cross-memory attach in the shm provider (staging copies instead).
    bool shm_cma = true;
    /// PMR_SHM_CMA_THRESHOLD: from this many bytes on, user-buffer windows use CMA, below it
    /// staging.
    std::size_t shm_cma_threshold = std::size_t{8} * 1024;
    /// PMR_SHM_CHUNK: rounds into a user buffer of at least twice this many bytes are cut into
    /// chunks (at least this large) that the waiting receiver may copy too; 0: the sender alone.
    std::size_t shm_chunk = std::size_t{1024} * 1024;
    /// PMR_ARENA_STEP: bytes by which the process's shared-memory arena grows (one memory file
    /// each); blocks larger than a quarter of it get a memory file of their own.
    std::size_t arena_step = std::size_t{64} << 20;
    /// PMR_ARENA_LIMIT: most bytes of shared memory (arena and own files) this process takes for
    /// pmr::allocate and library-owned windows; 0: no limit but the system's.
    std::size_t arena_limit = 0;
    /// PMR_STREAM_THRESHOLD: copies into another process's memory of at least this many bytes use
    /// streaming (non-temporal) stores; 0 (the default) never does. See copy.hpp for why.
    std::size_t stream_threshold = 0;
    /// PMR_WARN_AFTER: seconds a set-up wait takes before it warns once on stderr; 0 never does.
    double warn_after_seconds = 5.0;
    /// PMR_CHECKS: 1 enables the checks that cost something on the data path (a window used by two
    /// threads at once). Default: on in builds without NDEBUG, off otherwise.
    bool checks = false;
    /// PMR_LAUNCHER_HINTS: 0 ignores what the MPI launcher says about the job being on one node.
    bool launcher_hints = true;
    /// PMR_DEBUG: 1 logs set-up decisions (provider per connection, paths per window) to stderr.
    bool debug = false;
};

/// The settings of this process, read at the first call.
const Settings& settings();

/// Writes "pmr[rank]: message" to stderr when PMR_DEBUG is set.
void debug_log(const std::string& message);

} // namespace pmr::detail
