// SPDX-License-Identifier: MIT
/// @file runner.hpp
/// Runs a benchmark: per size, every variant is prepared, checked once, calibrated and warmed up,
/// then sampled in interleaved order (variant A, B, C, A, B, C, ... with a rotating start), so
/// slow drifts of the machine (frequency, other load, memory placement) hit pmr and every
/// baseline alike instead of favouring whichever ran first.
#pragma once

#include "benchmark.hpp"
#include "report.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace pmr_bench {

struct RunSettings {
    std::vector<std::size_t> sizes;
    int samples = 15;                 ///< timed samples per variant and size
    int warmup = 2;                   ///< untimed samples per variant and size before them
    double min_sample_seconds = 2e-3; ///< calibrate iterations per sample to at least this
    std::size_t iterations = 0;       ///< fixed iterations per sample; 0: calibrate
    std::size_t max_iterations = 1000000;
    bool verify = false;  ///< check every round (timings then include the checks)
    bool progress = true; ///< per-size progress on stderr (rank 0)
    /// Message sizes the throughput model is fitted to (--fit-sizes); all by default.
    std::size_t fit_first = 0;
    std::size_t fit_last = static_cast<std::size_t>(-1);
};

/// Runs every variant of `benchmark` at every size. Collective over `context.world`. The report
/// (header left empty for the caller) is complete on rank 0; other ranks get the series without
/// statistics.
Report run_benchmark(const std::string& name, Benchmark& benchmark, const RunSettings& settings,
                     const Context& context);

/// "shm: 4, null: 2": connections per provider over all ranks. Collective.
std::string providers_in_use(Benchmark& benchmark, const Context& context);

} // namespace pmr_bench
