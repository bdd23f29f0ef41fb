// SPDX-License-Identifier: MIT
/// @file report.hpp
/// Results of one benchmark run and their three renderings: terminal tables, CSV and JSON.
#pragma once

#include "fit.hpp"
#include "stats.hpp"

#include <cstddef>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace pmr_bench {

/// One message size of one variant. Times are the reported times (see Report::time_meaning).
struct SizeResult {
    std::size_t bytes = 0;      ///< message size
    double volume = 0;          ///< bytes counted for bandwidth: bytes x Report::volume_factor
    std::size_t iterations = 0; ///< iterations per sample
    Summary seconds;            ///< over the samples
    /// volume / median time [bytes/s]; 0 for empty messages.
    double bandwidth() const { return seconds.median > 0 ? volume / seconds.median : 0; }
};

struct Series {
    std::string variant;
    std::string family; ///< "pmr", "mpi" or "reference"
    std::string description;
    std::vector<SizeResult> sizes;
    ThroughputFit fit;               ///< t(volume) = t0 + volume / B over all sizes
    std::size_t verify_failures = 0; ///< rounds with wrong data, summed over ranks
    std::string first_failure;       ///< where and how, from the first rank that saw one
    bool is_pmr() const { return family == "pmr"; }
    bool is_mpi() const { return family == "mpi"; }
    bool is_reference() const { return family == "reference"; }
};

struct Report {
    std::string benchmark;
    std::vector<std::pair<std::string, std::string>> header; ///< machine, MPI, pmr, settings
    std::string time_meaning;
    double volume_factor = 1;
    std::vector<std::size_t> sizes;
    std::size_t fit_first = 0; ///< message sizes the fits use
    std::size_t fit_last = static_cast<std::size_t>(-1);
    std::vector<Series> series;
    std::vector<std::string> notes;
};

/// MPI time / pmr time at size index `i`: above 1, pmr is faster. 0 if either time is missing.
double speedup(const Series& pmr, const Series& mpi, std::size_t i);

/// Header, time and bandwidth tables, speed-ups, fits, notes.
void print_report(std::ostream& out, const Report& report);
/// One row per variant and size, with every statistic and the speed-up of each pmr variant.
void write_csv(std::ostream& out, const Report& report);
/// Everything, for scripts: header, results, speed-ups, fits, notes.
void write_json(std::ostream& out, const Report& report);

} // namespace pmr_bench
