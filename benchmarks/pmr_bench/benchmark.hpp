// SPDX-License-Identifier: MIT
/// @file benchmark.hpp
/// What a benchmark is made of: variants (pmr and its MPI baselines) that move the same data the
/// same way, and a registry so that a benchmark is one file that registers itself:
///
///     const bool registered = register_benchmark({"name", "summary", "8:16M", declare, create});
///
/// The runner (runner.hpp) does everything else: sizes, calibration, warm-up, interleaved samples,
/// statistics, fits, output.
#pragma once

#include "options.hpp"
#include "report.hpp"

#include <pmr/pmr.hpp>

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pmr_bench {

/// pmr, an MPI baseline, or a reference that moves no data between ranks (the local copy of the
/// same bytes, the bound for every transport that copies once).
enum class Family { pmr, mpi, reference };

/// Verification findings of one variant on this rank.
struct VerifyLog {
    std::size_t failures = 0;
    std::string first; ///< description of the first failure
};

/// Number of connections per pmr::Provider value, for the header.
using ProviderCounts = std::array<int, 8>;

/// One way of doing the benchmark's communication. prepare(), run() and release() are collective
/// over the benchmark's communicator: every rank calls them in the same order with the same
/// arguments.
class Variant {
public:
    Variant(std::string name, Family family, std::string description)
        : name_(std::move(name)), family_(family), description_(std::move(description)) {}
    Variant(const Variant&) = delete;
    Variant& operator=(const Variant&) = delete;
    virtual ~Variant() = default;

    const std::string& name() const noexcept { return name_; }
    Family family() const noexcept { return family_; }
    const std::string& description() const noexcept { return description_; }

    /// Builds the persistent objects (windows, requests, buffers) for messages of `bytes`.
    virtual void prepare(std::size_t bytes) = 0;
    /// Runs `iterations` rounds; this is what the runner times.
    virtual void run(std::size_t iterations) = 0;
    /// Destroys what prepare() built.
    virtual void release() = 0;
    /// Adds the providers of this rank's pmr connections (nothing for MPI variants).
    virtual void count_providers(ProviderCounts& /*counts*/) {}

    /// With verification on, run() writes a fresh pattern into every message and checks every
    /// received byte. The runner switches it on for one untimed round per size regardless of
    /// --verify, so wrong results are reported even in timing runs. References deliver nothing
    /// to check and stay off.
    void set_verify(bool on) noexcept { verify_ = on && family_ != Family::reference; }
    const VerifyLog& log() const noexcept { return log_; }

protected:
    bool verifying() const noexcept { return verify_; }
    /// Pattern of the message `sender` sends on `channel` in the current round.
    std::uint64_t seed(int sender, int channel) const noexcept;
    void fill(void* data, std::size_t bytes, int sender, int channel) const noexcept;
    /// Checks a received message against the pattern `sender` sent on `channel`. If it holds the
    /// pattern of `swapped_channel` instead (>= 0), the report says the blocks were swapped.
    void check(const void* data, std::size_t bytes, int sender, int channel,
               const std::string& where, int swapped_channel = -1);
    /// Records a failure that check() cannot see (a wrong reduction result).
    void report_failure(const std::string& what);
    /// Advances the round counter; call once per round on every rank.
    void next_round() noexcept { ++round_; }

private:
    std::string name_;
    Family family_;
    std::string description_;
    bool verify_ = false;
    std::uint64_t round_ = 0;
    VerifyLog log_;
};

/// Settings common to every benchmark, from the command line.
struct Context {
    MPI_Comm world = MPI_COMM_WORLD;
    int rank = 0;
    int size = 1;
    std::optional<pmr::Provider> provider; ///< --provider; none: pmr chooses
    bool owned_windows = true;             ///< --buffer owned|both
    bool user_windows = true;              ///< --buffer user|both
    std::vector<std::string> only;         ///< --variants; empty: all

    /// Whether the variant `name` was asked for (--variants, and --buffer for "pmr-owned" and
    /// "pmr-user").
    bool wants(const std::string& name) const;
    /// A connection to `target` with the provider of --provider. Null targets (MPI_PROC_NULL at a
    /// border) always get the null provider, whatever was asked.
    pmr::Connection connect(const pmr::Target& target) const;
};

/// One run of one benchmark: its variants and how to read its numbers.
class Benchmark {
public:
    Benchmark() = default;
    Benchmark(const Benchmark&) = delete;
    Benchmark& operator=(const Benchmark&) = delete;
    virtual ~Benchmark() = default;

    /// Configuration lines for the header ("grid", "2 x 1 x 1, periodic: no").
    virtual std::vector<std::pair<std::string, std::string>> describe() const = 0;
    /// What the reported time is ("one-way time: round trip / 2").
    virtual std::string time_meaning() const = 0;
    /// Reported time = measured time per iteration / this (2 for a ping-pong round trip).
    virtual double time_divisor() const { return 1; }
    /// Bytes per iteration that count for bandwidth and fit = message size x this (ping-pong: 1;
    /// exchange: the number of messages the busiest rank sends).
    virtual double volume_factor() const { return 1; }
    /// Anything the reader must know, e.g. a known MPI defect this configuration triggers.
    virtual std::vector<std::string> notes() const { return {}; }
    /// Series of family "model": what a timing model predicts at `sizes` (no samples; every
    /// statistic is the prediction). The report sets them beside the measurements and prints
    /// measured / predicted for the pmr variant of the same name after "model-".
    virtual std::vector<Series> predictions(const std::vector<std::size_t>& /*sizes*/) const {
        return {};
    }

    std::vector<std::unique_ptr<Variant>>& variants() noexcept { return variants_; }

protected:
    void add(std::unique_ptr<Variant> variant) { variants_.push_back(std::move(variant)); }

private:
    std::vector<std::unique_ptr<Variant>> variants_;
};

/// Registry entry of a benchmark: static data only, so that registering cannot throw before main.
struct BenchmarkEntry {
    const char* name;
    const char* summary;
    /// Sizes when --sizes is not given, in --sizes syntax, separated by spaces ("0 8:16M").
    const char* default_sizes;
    /// Declares the benchmark's own options (the common ones are declared by main).
    void (*declare_options)(Options& options);
    /// Creates the benchmark for this run: communicators, connections, variants. Collective.
    std::unique_ptr<Benchmark> (*create)(const Options& options, const Context& context);
};

/// Adds a benchmark; returns true so that it can initialise a namespace-scope constant.
bool register_benchmark(const BenchmarkEntry& entry) noexcept;
/// Every registered benchmark, sorted by name.
std::vector<BenchmarkEntry> registered_benchmarks();
/// The benchmark called `name`, or nullptr.
const BenchmarkEntry* find_benchmark(const std::string& name);

} // namespace pmr_bench
