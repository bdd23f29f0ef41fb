// SPDX-License-Identifier: MIT
/// @file allreduce.cpp
/// `pmr-bench allreduce`: a global sum of doubles on every rank of the world, in place. pmr's
/// persistent Allreduce (automatic choice and each algorithm forced) against MPI_Allreduce,
/// interleaved per sample. The message size is the vector's size in bytes (8 B = one double).
/// `pmr-trinaryx3` (only when named in --variants: it needs >= 3 rails) runs on a periodic 3D grid
/// of the world (MPI_Dims_create). On the emulated Tofu with its timing model on, the series
/// `model-rd`, `model-ring` and `model-trinaryx3` give what the model predicts
/// (allreduce_model.hpp).
#include "allreduce_init.hpp"
#include "allreduce_model.hpp"
#include "benchmark.hpp"
#include "mpi_check.hpp"
#include "sync_floor.hpp"

#include <pmr/collectives.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace pmr_bench {
namespace {

std::size_t doubles_of(std::size_t bytes) {
    return std::max<std::size_t>(bytes / sizeof(double), 1);
}

/// With verification on, rank r contributes r + 1 + (i mod 5) to element i: small integers, so
/// every order of the sum gives exactly size (size + 1) / 2 + size (i mod 5).
class AllreduceVariant : public Variant {
public:
    AllreduceVariant(std::string name, Family family, std::string description,
                     const Context& context)
        : Variant(std::move(name), family, std::move(description)), rank_(context.rank),
          size_(context.size) {}

protected:
    void fill_input(double* data, std::size_t count) const {
        for (std::size_t i = 0; i < count; ++i) {
            data[i] = rank_ + 1.0 + static_cast<double>(i % 5);
        }
    }
    void check_result(const double* data, std::size_t count) {
        const double base = size_ * (size_ + 1.0) / 2;
        for (std::size_t i = 0; i < count; ++i) {
            const double expected = base + size_ * static_cast<double>(i % 5);
            if (data[i] != expected) {
                report_failure(name() + ": element " + std::to_string(i) + " of " +
                               std::to_string(count) + " is " + std::to_string(data[i]) +
                               ", expected " + std::to_string(expected));
                return;
            }
        }
    }
    int rank_;
    int size_;
};

class PmrAllreduce final : public AllreduceVariant {
public:
    PmrAllreduce(const Context& context, pmr::AllreduceAlgorithm algorithm, std::string name)
        : AllreduceVariant(std::move(name), Family::pmr,
                           "pmr::Allreduce<double>, " + std::string(pmr::to_string(algorithm)) +
                               ", library-owned buffer, in place" +
                               (on_grid(algorithm) ? ", periodic 3D grid of the world" : ""),
                           context),
          algorithm_(algorithm) {}

    void prepare(std::size_t bytes) override {
        // The automatic choice sees the grid a 3D stencil code would pass (Trinaryx3 needs one).
        comm_ = on_grid(algorithm_)
                    ? std::make_unique<pmr::Communicator>(MPI_COMM_WORLD, std::vector<int>{0, 0, 0},
                                                          std::vector<bool>{true, true, true})
                    : std::make_unique<pmr::Communicator>(MPI_COMM_WORLD);
        reduce_ =
            pmr::Allreduce<double>(*comm_, doubles_of(bytes), pmr::ReduceOp::sum, {algorithm_});
        count_ = doubles_of(bytes);
    }
    void run(std::size_t iterations) override {
        for (std::size_t i = 0; i < iterations; ++i) {
            if (verifying()) {
                fill_input(reduce_.data(), count_);
            }
            reduce_();
            if (verifying()) {
                check_result(reduce_.data(), count_);
            }
            next_round();
        }
    }
    void release() override {
        reduce_ = pmr::Allreduce<double>();
        comm_.reset();
    }

private:
    static bool on_grid(pmr::AllreduceAlgorithm algorithm) {
        return algorithm == pmr::AllreduceAlgorithm::trinaryx3 ||
               algorithm == pmr::AllreduceAlgorithm::automatic;
    }

    pmr::AllreduceAlgorithm algorithm_;
    std::unique_ptr<pmr::Communicator> comm_;
    pmr::Allreduce<double> reduce_;
    std::size_t count_ = 0;
};

class MpiAllreduce final : public AllreduceVariant {
public:
    explicit MpiAllreduce(const Context& context)
        : AllreduceVariant("mpi-allreduce", Family::mpi, "MPI_Allreduce, MPI_IN_PLACE", context) {}

    void prepare(std::size_t bytes) override { data_.assign(doubles_of(bytes), 0.0); }
    void run(std::size_t iterations) override {
        const auto count = static_cast<int>(data_.size());
        for (std::size_t i = 0; i < iterations; ++i) {
            if (verifying()) {
                fill_input(data_.data(), data_.size());
            }
            MPI_Allreduce(MPI_IN_PLACE, data_.data(), count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            if (verifying()) {
                check_result(data_.data(), data_.size());
            }
            next_round();
        }
    }
    void release() override { data_ = {}; }

private:
    std::vector<double> data_;
};

/// MPI's persistent allreduce (MPI 4 or Open MPI's MPIX extension), in place.
class MpiPersistentAllreduce final : public AllreduceVariant {
public:
    explicit MpiPersistentAllreduce(const Context& context)
        : AllreduceVariant("mpix-allreduce", Family::mpi,
                           std::string(persistent_allreduce_name()) + ", MPI_IN_PLACE, started "
                                                                      "and waited per round",
                           context) {}

    void prepare(std::size_t bytes) override {
        data_.assign(doubles_of(bytes), 0.0);
        check_mpi(allreduce_init(MPI_IN_PLACE, data_.data(), static_cast<int>(data_.size()),
                                 MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &request_),
                  persistent_allreduce_name());
    }
    void run(std::size_t iterations) override {
        for (std::size_t i = 0; i < iterations; ++i) {
            if (verifying()) {
                fill_input(data_.data(), data_.size());
            }
            check_mpi(MPI_Start(&request_), "MPI_Start");
            check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
            if (verifying()) {
                check_result(data_.data(), data_.size());
            }
            next_round();
        }
    }
    void release() override {
        if (request_ != MPI_REQUEST_NULL) {
            check_mpi(MPI_Request_free(&request_), "MPI_Request_free");
        }
        data_ = {};
    }

private:
    std::vector<double> data_;
    MPI_Request request_ = MPI_REQUEST_NULL;
};

class AllreduceBenchmark final : public Benchmark {
public:
    explicit AllreduceBenchmark(const Context& context) : size_(context.size) {
        const std::pair<const char*, pmr::AllreduceAlgorithm> pmr_variants[] = {
            {"pmr-allreduce", pmr::AllreduceAlgorithm::automatic},
            {"pmr-rd", pmr::AllreduceAlgorithm::recursive_doubling},
            {"pmr-ring", pmr::AllreduceAlgorithm::ring},
            {"pmr-direct", pmr::AllreduceAlgorithm::direct},
        };
        for (const auto& [name, algorithm] : pmr_variants) {
            if (context.wants(name)) {
                add(std::make_unique<PmrAllreduce>(context, algorithm, name));
            }
        }
        // Only on request: it needs a provider with >= 3 rails, which the default runs lack.
        if (std::find(context.only.begin(), context.only.end(), "pmr-trinaryx3") !=
            context.only.end()) {
            add(std::make_unique<PmrAllreduce>(context, pmr::AllreduceAlgorithm::trinaryx3,
                                               "pmr-trinaryx3"));
        }
        if (context.wants("mpi-allreduce")) {
            add(std::make_unique<MpiAllreduce>(context));
        }
        if (persistent_allreduce_name() != nullptr && context.wants("mpix-allreduce")) {
            add(std::make_unique<MpiPersistentAllreduce>(context));
        }
        if (context.wants("sync-floor")) {
            if (auto floor = make_sync_floor(context)) {
                add(std::move(floor));
            }
        }
        network_ = emulated_tofu_network();
        int dims[3] = {0, 0, 0};
        MPI_Dims_create(size_, 3, dims);
        extents_ = {dims[0], dims[1], dims[2]};
    }

    std::vector<Series> predictions(const std::vector<std::size_t>& sizes) const override {
        if (!network_) {
            return {};
        }
        const TofuNetwork& net = *network_;
        const auto grid = std::to_string(extents_[0]) + " x " + std::to_string(extents_[1]) +
                          " x " + std::to_string(extents_[2]);
        const std::string model = "tofu model " + net.name + ", " + std::to_string(net.tnis) +
                                  " TNIs, time scale " + std::to_string(net.time_scale) +
                                  "; network only";
        std::vector<Series> series;
        auto predict = [&](const char* name, const std::string& what, auto seconds_of) {
            Series s;
            s.variant = name;
            s.family = "model";
            s.description = what + " (" + model + ")";
            for (std::size_t bytes : sizes) {
                SizeResult r;
                r.bytes = bytes;
                const double t =
                    seconds_of(static_cast<double>(doubles_of(bytes) * sizeof(double)));
                r.seconds.median = r.seconds.mean = r.seconds.min = r.seconds.max = r.seconds.p25 =
                    r.seconds.p75 = t;
                s.sizes.push_back(r);
            }
            series.push_back(std::move(s));
        };
        const int p = size_;
        predict("model-rd", "recursive doubling, " + std::to_string(p) + " ranks",
                [&](double m) { return recursive_doubling_seconds(net, p, m); });
        predict("model-ring", "ring, " + std::to_string(p) + " ranks",
                [&](double m) { return ring_seconds(net, p, m); });
        predict("model-trinaryx3", "trinaryx3 on " + grid,
                [&](double m) { return trinaryx3_seconds(net, extents_, m); });
        return series;
    }

    std::vector<std::pair<std::string, std::string>> describe() const override {
        return {{"allreduce", "sum of doubles over " + std::to_string(size_) +
                                  " rank(s), in place (providers: pmr's choice or "
                                  "PMR_PROVIDER; --provider does not apply)"}};
    }
    std::string time_meaning() const override { return "time of one allreduce (slowest rank)"; }

private:
    int size_;
    std::optional<TofuNetwork> network_;
    std::array<int, 3> extents_{};
};

void declare(Options& /*options*/) {}

std::unique_ptr<Benchmark> create(const Options& /*options*/, const Context& context) {
    return std::make_unique<AllreduceBenchmark>(context);
}

const bool registered = register_benchmark(
    {"allreduce", "global sum of doubles on every rank: pmr::Allreduce against MPI_Allreduce",
     "8:1M", declare, create});

} // namespace
} // namespace pmr_bench
