// SPDX-License-Identifier: MIT
/// @file main.cpp
/// pmr-bench: `pmr-bench <benchmark> [options]` measures pmr against MPI baselines in one run;
/// `pmr-bench model` prints what the closed formulas of 002 predict; `pmr-bench list` lists the
/// benchmarks. Benchmarks register themselves (benchmark.hpp); this file owns the common options,
/// the header and the output files.

#include "benchmark.hpp"
#include "model_command.hpp"
#include "options.hpp"
#include "plot.hpp"
#include "runner.hpp"
#include "system_info.hpp"
#include "topology_command.hpp"
#include "windows_command.hpp"

#include <pmr/pmr.hpp>

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

namespace pmr_bench {
namespace {

void print_usage(std::ostream& out) {
    out << "usage: pmr-bench <benchmark> [options]   measure pmr against MPI (run with mpirun)\n"
           "       pmr-bench model [options]         predictions of the closed formulas of 002\n"
           "       pmr-bench topology [options]      the virtual 3D torus on the Tofu 6D torus\n"
           "       pmr-bench windows [options]       set-up pace and resources per window pair\n"
           "       pmr-bench list                    the benchmarks\n"
           "       pmr-bench <benchmark> --help      options of a benchmark\n\n"
           "benchmarks:\n";
    for (const auto& entry : registered_benchmarks()) {
        const std::string name = entry.name;
        out << "  " << name << std::string(name.size() < 12 ? 12 - name.size() : 1, ' ')
            << entry.summary << "\n";
    }
}

std::vector<std::string> split_words(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> words;
    for (std::string word; in >> word;) {
        words.push_back(word);
    }
    return words;
}

void declare_common(Options& o, const std::string& default_sizes) {
    o.declare("sizes", Arity::many, "SIZE...",
              "message sizes: 4096, 4K, 1M, ranges FIRST:LAST[:FACTOR]",
              split_words(default_sizes));
    o.declare("samples", Arity::one, "N", "timed samples per variant and size", {"15"});
    o.declare("warmup", Arity::one, "N", "untimed samples before them", {"2"});
    o.declare("min-time", Arity::one, "MS", "shortest sample; sets the iterations per sample",
              {"2"});
    o.declare("iterations", Arity::one, "N", "fixed iterations per sample instead of --min-time");
    o.declare("fit-sizes", Arity::one, "FIRST:LAST",
              "fit the throughput model to these message sizes only (default: all)");
    o.declare("verify", Arity::flag, "",
              "check every received byte of every iteration (timings then include the checks)");
    o.declare("provider", Arity::one, "NAME",
              "pmr provider for every connection (" + pmr::compiled_providers_string() +
                  "); default: pmr chooses");
    o.declare("rails", Arity::one, "N",
              "rails per connection of a provider with rails (sets PMR_RAILS; default: its own)");
    o.declare("buffer", Arity::one, "owned|user|both",
              "pmr windows in library-owned memory, over user buffers, or both", {"both"});
    o.declare("variants", Arity::many, "NAME...", "run only these variants (see the output)");
    o.declare("csv", Arity::one, "FILE", "write the results as CSV");
    o.declare("json", Arity::one, "FILE", "write the results and fits as JSON");
    o.declare("plot", Arity::one, "FILE.png", "draw bandwidth over size with gnuplot");
    o.declare("quiet", Arity::flag, "", "no progress on stderr");
    o.declare("help", Arity::flag, "", "this text");
}

/// Validates --provider against the providers of this build.
std::optional<pmr::Provider> provider_option(const Options& o) {
    if (!o.given("provider")) {
        return std::nullopt;
    }
    std::string name = o.value("provider");
    auto provider = pmr::provider_from_string(name);
    if (!provider || !pmr::is_compiled(*provider)) {
        throw UsageError("--provider " + name + ": " +
                         (provider ? "not compiled into this build" : "unknown provider") +
                         "; this build has: " + pmr::compiled_providers_string());
    }
    return provider;
}

RunSettings settings_from(const Options& o) {
    RunSettings s;
    s.sizes = o.sizes("sizes");
    s.samples = static_cast<int>(o.integer("samples"));
    s.warmup = static_cast<int>(o.integer("warmup"));
    s.min_sample_seconds = o.number("min-time") * 1e-3;
    if (o.given("iterations")) {
        long n = o.integer("iterations");
        if (n < 1) {
            throw UsageError("--iterations must be at least 1");
        }
        s.iterations = static_cast<std::size_t>(n);
    }
    if (o.given("fit-sizes")) {
        const std::string range = o.value("fit-sizes");
        const auto colon = range.find(':');
        if (colon == std::string::npos) {
            throw UsageError("--fit-sizes needs FIRST:LAST, e.g. 64K:16M");
        }
        s.fit_first = parse_size(range.substr(0, colon));
        s.fit_last = parse_size(range.substr(colon + 1));
        if (s.fit_last < s.fit_first) {
            throw UsageError("--fit-sizes: LAST is smaller than FIRST");
        }
    }
    s.verify = o.flag("verify");
    s.progress = !o.flag("quiet");
    if (s.samples < 1 || s.warmup < 0 || s.min_sample_seconds < 0) {
        throw UsageError("--samples must be at least 1, --warmup and --min-time not negative");
    }
    if (s.sizes.empty()) {
        throw UsageError("--sizes: no sizes");
    }
    if (s.sizes.back() > static_cast<std::size_t>(INT_MAX) / 8) {
        throw UsageError("--sizes: MPI counts are int; the largest size allowed is " +
                         format_size(static_cast<std::size_t>(INT_MAX) / 8));
    }
    return s;
}

Context context_from(const Options& o) {
    Context c;
    MPI_Comm_rank(c.world, &c.rank);
    MPI_Comm_size(c.world, &c.size);
    c.provider = provider_option(o);
    // Before any connection exists: the neighbour-exchange variants make their connections
    // themselves and follow the environment, and rails are read from it once.
    if (c.provider) {
        setenv("PMR_PROVIDER", std::string(pmr::to_string(*c.provider)).c_str(), // NOLINT
               1);
    }
    if (o.given("rails")) {
        const long rails = o.integer("rails");
        if (rails < 1) {
            throw UsageError("--rails must be at least 1");
        }
        setenv("PMR_RAILS", std::to_string(rails).c_str(), 1); // NOLINT(concurrency-mt-unsafe)
    }
    std::string buffer = o.value("buffer");
    if (buffer != "owned" && buffer != "user" && buffer != "both") {
        throw UsageError("--buffer must be owned, user or both");
    }
    c.owned_windows = buffer != "user";
    c.user_windows = buffer != "owned";
    if (o.given("variants")) {
        c.only = o.values("variants");
    }
    return c;
}

std::string command_line(int argc, char** argv) {
    std::string text;
    for (int i = 0; i < argc; ++i) {
        text += (i ? " " : "") + std::string(argv[i]);
    }
    return text;
}

void write_file(const std::string& path, void (*writer)(std::ostream&, const Report&),
                const Report& report) {
    std::ofstream file(path);
    writer(file, report);
    if (!file) {
        throw std::runtime_error("pmr-bench: cannot write " + path);
    }
}

/// Runs one benchmark under MPI. Returns the exit status.
int run_measurement(const BenchmarkEntry& entry, const std::vector<std::string>& words, int argc,
                    char** argv) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    Options options;
    declare_common(options, entry.default_sizes);
    entry.declare_options(options);
    options.parse(words);
    if (options.flag("help")) {
        if (rank == 0) {
            std::cout << "usage: mpirun -np N pmr-bench " << entry.name << " [options]\n"
                      << entry.summary << "\n\n"
                      << options.help();
        }
        return 0;
    }
    Context context = context_from(options);
    RunSettings settings = settings_from(options);

    // Fail before measuring, not after, if the plot cannot be drawn.
    std::string gnuplot;
    if (options.given("plot")) {
        gnuplot = find_gnuplot();
        if (gnuplot.empty()) {
            throw UsageError(gnuplot_missing_message());
        }
    }

    HeaderLines header = describe_environment(context.world);
    auto benchmark = entry.create(options, context);
    std::string available;
    for (const auto& v : benchmark->variants()) {
        available += (available.empty() ? "" : ", ") + v->name();
    }
    for (const auto& name : context.only) {
        const auto& variants = benchmark->variants();
        if (std::none_of(variants.begin(), variants.end(),
                         [&](const auto& v) { return v->name() == name; })) {
            throw UsageError("--variants: " + name + " is not a variant of " +
                             std::string(entry.name) + " with these options" +
                             (available.empty() ? "" : " (left: " + available + ")"));
        }
    }
    if (benchmark->variants().empty()) {
        throw UsageError("no variant left to run (see --variants and --buffer)");
    }

    Report report = run_benchmark(entry.name, *benchmark, settings, context);

    std::string providers = providers_in_use(*benchmark, context);
    if (rank != 0) {
        return 0;
    }
    report.header.emplace_back("command", command_line(argc, argv));
    for (auto& line : header) {
        report.header.push_back(std::move(line));
    }
    report.header.emplace_back("provider",
                               (context.provider
                                    ? "--provider " + std::string(pmr::to_string(*context.provider))
                                    : std::string("chosen by pmr")) +
                                   "; in use: " + providers);
    for (auto& line : benchmark->describe()) {
        report.header.push_back(std::move(line));
    }
    std::ostringstream run;
    run << settings.samples << " samples after " << settings.warmup << " warm-up, "
        << (settings.iterations
                ? std::to_string(settings.iterations) + " iterations each"
                : "iterations per sample for >= " +
                      std::to_string(settings.min_sample_seconds * 1e3).substr(0, 5) + " ms")
        << ", variants interleaved; "
        << (settings.verify ? "--verify: every round checked (timings include the checks)"
                            : "data checked once per size, untimed");
    report.header.emplace_back("sampling", run.str());

    print_report(std::cout, report);
    std::cout.flush();
    if (options.given("csv")) {
        write_file(options.value("csv"), write_csv, report);
    }
    if (options.given("json")) {
        write_file(options.value("json"), write_json, report);
    }
    if (options.given("plot")) {
        std::string error = plot_report(report, options.value("plot"), gnuplot);
        if (!error.empty()) {
            std::cerr << "pmr-bench: " << error << "\n";
            return 1;
        }
    }
    for (const auto& s : report.series) {
        if (s.is_pmr() && s.verify_failures > 0) {
            std::cerr << "pmr-bench: pmr delivered wrong data (" << s.variant
                      << "): " << s.first_failure << "\n";
            return 1;
        }
    }
    return 0;
}

} // namespace
} // namespace pmr_bench

int main(int argc, char** argv) {
    using namespace pmr_bench;
    std::vector<std::string> words(argv + 1, argv + argc);
    std::string command = words.empty() ? "help" : words.front();
    if (!words.empty()) {
        words.erase(words.begin());
    }

    // Commands that measure nothing run without MPI.
    if (command == "help" || command == "--help" || command == "-h") {
        print_usage(std::cout);
        return 0;
    }
    if (command == "list") {
        for (const auto& entry : registered_benchmarks()) {
            std::cout << entry.name << "\t" << entry.summary << "\n";
        }
        return 0;
    }
    if (command == "model") {
        try {
            return run_model_command(words, std::cout);
        } catch (const UsageError& e) {
            std::cerr << "pmr-bench model: " << e.what() << " (see pmr-bench model --help)\n";
            return 2;
        }
    }
    if (command == "topology") {
        try {
            return run_topology_command(words, std::cout);
        } catch (const UsageError& e) {
            std::cerr << "pmr-bench topology: " << e.what() << " (see pmr-bench topology --help)\n";
            return 2;
        }
    }
    if (command == "windows") {
        MPI_Init(&argc, &argv);
        int status = 0;
        try {
            status = run_windows_command(words, std::cout);
        } catch (const std::exception& e) {
            std::cerr << "pmr-bench windows: " << e.what() << "\n";
            std::cerr.flush();
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Finalize();
        return status;
    }
    const BenchmarkEntry* entry = find_benchmark(command);
    if (entry == nullptr) {
        std::cerr << "pmr-bench: unknown command '" << command << "'\n";
        print_usage(std::cerr);
        return 2;
    }

    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int status = 0;
    try {
        status = run_measurement(*entry, words, argc, argv);
    } catch (const UsageError& e) {
        // Every rank parses the same command line, so every rank gets here: no abort needed.
        if (rank == 0) {
            std::cerr << "pmr-bench " << entry->name << ": " << e.what() << " (see pmr-bench "
                      << entry->name << " --help)\n";
        }
        status = 2;
    } catch (const std::exception& e) {
        // pmr and MPI failures can hit one rank while the others wait for it: abort them all.
        std::cerr << "pmr-bench " << entry->name << ", rank " << rank << ": " << e.what() << "\n";
        std::cerr.flush();
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return status;
}
