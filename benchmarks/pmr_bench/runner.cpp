// SPDX-License-Identifier: MIT
#include "runner.hpp"

#include "mpi_check.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace pmr_bench {

namespace {

using Clock = std::chrono::steady_clock;

/// One timed sample: all ranks start together, the slowest rank's time counts (a halo exchange
/// is only done when every rank is done). One untimed round first: the variants take turns, and
/// without it the first timed round would pay for bringing this variant's buffers, page tables
/// and library state back into the caches after the others ran. That cost is real, but it
/// belongs to the switch between variants, not to a halo exchange repeated in a loop; with a
/// few rounds per sample (large messages) it made every variant look up to twice as slow.
double timed_sample(Variant& variant, std::size_t iterations, MPI_Comm comm) {
    variant.run(1);
    check_mpi(MPI_Barrier(comm), "MPI_Barrier");
    auto start = Clock::now();
    variant.run(iterations);
    double local = std::chrono::duration<double>(Clock::now() - start).count();
    double slowest = 0;
    check_mpi(MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
    return slowest;
}

/// Iterations per sample so that a sample lasts at least settings.min_sample_seconds. Every rank
/// computes the same number because the times it is based on are reduced over all ranks.
std::size_t calibrate(Variant& variant, const RunSettings& settings, MPI_Comm comm) {
    if (settings.iterations > 0) {
        return settings.iterations;
    }
    std::size_t n = 1;
    double seconds = 0;
    while (true) {
        seconds = timed_sample(variant, n, comm);
        if (seconds >= settings.min_sample_seconds / 4 || n >= settings.max_iterations) {
            break;
        }
        n *= 4;
    }
    double per_iteration = seconds / static_cast<double>(n);
    double wanted = per_iteration > 0 ? std::ceil(settings.min_sample_seconds / per_iteration) : 1;
    return static_cast<std::size_t>(
        std::clamp(wanted, 1.0, static_cast<double>(settings.max_iterations)));
}

class Progress {
public:
    Progress(bool enabled, std::string name, std::size_t total)
        : enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0), name_(std::move(name)),
          total_(total), start_(Clock::now()) {}
    void size(std::size_t index, std::size_t bytes) const {
        if (!enabled_) {
            return;
        }
        double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
        std::fprintf(stderr, "%s[%s] size %zu/%zu: %s, %.1f s elapsed%s", tty_ ? "\r" : "",
                     name_.c_str(), index + 1, total_, format_size(bytes).c_str(), elapsed,
                     tty_ ? "      " : "\n");
        std::fflush(stderr);
    }
    void done() const {
        if (!enabled_) {
            return;
        }
        double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
        std::fprintf(stderr, "%s[%s] done, %zu sizes in %.1f s\n", tty_ ? "\r" : "", name_.c_str(),
                     total_, elapsed);
    }

private:
    bool enabled_;
    bool tty_;
    std::string name_;
    std::size_t total_;
    Clock::time_point start_;
};

/// Sums the failure counts over ranks and brings the first failing rank's message to rank 0.
void collect_failures(Variant& variant, Series& series, const Context& context) {
    unsigned long local = variant.log().failures;
    unsigned long total = 0;
    check_mpi(MPI_Allreduce(&local, &total, 1, MPI_UNSIGNED_LONG, MPI_SUM, context.world),
              "MPI_Allreduce");
    series.verify_failures = total;
    if (total == 0) {
        return;
    }
    int candidate = local > 0 ? context.rank : context.size;
    int first = 0;
    check_mpi(MPI_Allreduce(&candidate, &first, 1, MPI_INT, MPI_MIN, context.world),
              "MPI_Allreduce");
    std::string message = "rank " + std::to_string(first) + ": " + variant.log().first;
    if (first != 0) {
        if (context.rank == first) {
            check_mpi(MPI_Send(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, 0,
                               context.world),
                      "MPI_Send");
        } else if (context.rank == 0) {
            MPI_Status status;
            check_mpi(MPI_Probe(first, 0, context.world, &status), "MPI_Probe");
            int length = 0;
            MPI_Get_count(&status, MPI_CHAR, &length);
            message.assign(static_cast<std::size_t>(length), '\0');
            check_mpi(MPI_Recv(message.data(), length, MPI_CHAR, first, 0, context.world,
                               MPI_STATUS_IGNORE),
                      "MPI_Recv");
        }
    }
    series.first_failure = message;
}

} // namespace

Report run_benchmark(const std::string& name, Benchmark& benchmark, const RunSettings& settings,
                     const Context& context) {
    auto& variants = benchmark.variants();
    const std::size_t count = variants.size();
    const double divisor = benchmark.time_divisor();
    const MPI_Comm comm = context.world;

    Report report;
    report.benchmark = name;
    report.time_meaning = benchmark.time_meaning();
    report.volume_factor = benchmark.volume_factor();
    report.sizes = settings.sizes;
    report.fit_first = settings.fit_first;
    report.fit_last = settings.fit_last;
    report.notes = benchmark.notes();
    for (const auto& v : variants) {
        Series s;
        s.variant = v->name();
        s.family = v->family() == Family::pmr   ? "pmr"
                   : v->family() == Family::mpi ? "mpi"
                                                : "reference";
        s.description = v->description();
        report.series.push_back(std::move(s));
    }

    Progress progress(settings.progress && context.rank == 0, name, settings.sizes.size());
    for (std::size_t si = 0; si < settings.sizes.size(); ++si) {
        const std::size_t bytes = settings.sizes[si];
        progress.size(si, bytes);
        for (auto& v : variants) {
            v->prepare(bytes);
        }
        // One verified round per variant and size even without --verify: a baseline that
        // delivers wrong data must be reported, not timed as if it were right.
        for (auto& v : variants) {
            v->set_verify(true);
            timed_sample(*v, 1, comm);
            v->set_verify(settings.verify);
        }
        std::vector<std::size_t> iterations(count);
        for (std::size_t k = 0; k < count; ++k) {
            iterations[k] = calibrate(*variants[k], settings, comm);
        }
        for (int w = 0; w < settings.warmup; ++w) {
            for (std::size_t k = 0; k < count; ++k) {
                timed_sample(*variants[k], iterations[k], comm);
            }
        }
        std::vector<std::vector<double>> samples(count);
        for (int s = 0; s < settings.samples; ++s) {
            for (std::size_t j = 0; j < count; ++j) {
                std::size_t k = (static_cast<std::size_t>(s) + j) % count;
                double seconds = timed_sample(*variants[k], iterations[k], comm);
                samples[k].push_back(seconds / static_cast<double>(iterations[k]) / divisor);
            }
        }
        check_mpi(MPI_Barrier(comm), "MPI_Barrier");
        for (auto& v : variants) {
            v->release();
        }
        for (std::size_t k = 0; k < count; ++k) {
            SizeResult r;
            r.bytes = bytes;
            r.volume = static_cast<double>(bytes) * report.volume_factor;
            r.iterations = iterations[k];
            r.seconds = summarize(samples[k]);
            report.series[k].sizes.push_back(r);
        }
    }
    progress.done();

    for (std::size_t k = 0; k < count; ++k) {
        collect_failures(*variants[k], report.series[k], context);
        std::vector<TimePoint> points;
        for (const auto& r : report.series[k].sizes) {
            if (r.bytes >= settings.fit_first && r.bytes <= settings.fit_last) {
                points.push_back({r.volume, r.seconds.median});
            }
        }
        report.series[k].fit = fit_throughput(points);
    }
    for (Series& predicted : benchmark.predictions(settings.sizes)) {
        std::vector<TimePoint> points;
        for (auto& r : predicted.sizes) {
            r.volume = static_cast<double>(r.bytes) * report.volume_factor;
            if (r.bytes >= settings.fit_first && r.bytes <= settings.fit_last) {
                points.push_back({r.volume, r.seconds.median});
            }
        }
        predicted.fit = fit_throughput(points);
        report.series.push_back(std::move(predicted));
    }
    return report;
}

std::string providers_in_use(Benchmark& benchmark, const Context& context) {
    ProviderCounts local{};
    for (auto& v : benchmark.variants()) {
        v->count_providers(local);
    }
    ProviderCounts total{};
    check_mpi(MPI_Allreduce(local.data(), total.data(), static_cast<int>(local.size()), MPI_INT,
                            MPI_SUM, context.world),
              "MPI_Allreduce");
    std::string text;
    for (std::size_t p = 0; p < total.size(); ++p) {
        if (total[p] > 0) {
            text += (text.empty() ? "" : ", ") +
                    std::string(pmr::to_string(static_cast<pmr::Provider>(p))) + ": " +
                    std::to_string(total[p]);
        }
    }
    return text.empty() ? "(no pmr connections)" : text + " connection(s) over all ranks";
}

} // namespace pmr_bench
