// SPDX-License-Identifier: MIT
/// @file collectives.cpp
/// `pmr-bench barrier`, `bcast` and `allgather`: pmr's persistent Barrier, Broadcast<unsigned
/// char> (root 0) and Allgather<unsigned char> on every rank of the world against MPI_Barrier,
/// MPI_Bcast and MPI_Allgather, interleaved per sample. The message size is the broadcast
/// message, or each rank's block of the allgather; the barrier moves no data (every size times
/// the same barrier).
#include "benchmark.hpp"
#include "buffer.hpp"
#include "mpi_check.hpp"
#include "sync_floor.hpp"

#include <pmr/collectives.hpp>

#include <memory>
#include <string>

namespace pmr_bench {
namespace {

enum class Kind { barrier, bcast, allgather };

constexpr int root = 0;

/// One collective, pmr or MPI; the pmr and MPI variants share the data checks.
class CollectiveVariant : public Variant {
public:
    CollectiveVariant(std::string name, Family family, std::string description, Kind kind,
                      const Context& context)
        : Variant(std::move(name), family, std::move(description)), kind_(kind),
          rank_(context.rank), size_(context.size) {}

    void run(std::size_t iterations) override {
        for (std::size_t i = 0; i < iterations; ++i) {
            if (verifying()) {
                fill_inputs();
            }
            once();
            if (verifying()) {
                check_outputs();
            }
            next_round();
        }
    }

protected:
    /// One collective call on the buffers below.
    virtual void once() = 0;
    /// Broadcast buffer or allgather output (size x bytes_), and the allgather input.
    virtual unsigned char* output() = 0;
    virtual unsigned char* input() = 0;

    void fill_inputs() {
        if (kind_ == Kind::bcast && rank_ == root) {
            fill(output(), bytes_, root, 0);
        } else if (kind_ == Kind::allgather) {
            fill(input(), bytes_, rank_, 0);
        }
    }
    void check_outputs() {
        if (kind_ == Kind::bcast) {
            check(output(), bytes_, root, 0, name() + " from root 0");
        } else if (kind_ == Kind::allgather) {
            for (int j = 0; j < size_; ++j) {
                check(output() + static_cast<std::size_t>(j) * bytes_, bytes_, j, 0,
                      name() + ", block of rank " + std::to_string(j));
            }
        }
    }

    Kind kind_;
    int rank_;
    int size_;
    std::size_t bytes_ = 0;
};

class PmrCollective final : public CollectiveVariant {
public:
    PmrCollective(Kind kind, const Context& context)
        : CollectiveVariant(kind == Kind::barrier ? "pmr-barrier"
                            : kind == Kind::bcast ? "pmr-bcast"
                                                  : "pmr-allgather",
                            Family::pmr,
                            kind == Kind::barrier ? "pmr::Barrier"
                            : kind == Kind::bcast
                                ? "pmr::Broadcast<unsigned char>, root 0, library-owned buffer"
                                : "pmr::Allgather<unsigned char>, library-owned buffers",
                            kind, context) {}

    void prepare(std::size_t bytes) override {
        bytes_ = bytes;
        comm_ = std::make_unique<pmr::Communicator>(MPI_COMM_WORLD);
        switch (kind_) {
        case Kind::barrier:
            barrier_ = pmr::Barrier(*comm_);
            break;
        case Kind::bcast:
            bcast_ = pmr::Broadcast<unsigned char>(*comm_, bytes, root);
            break;
        case Kind::allgather:
            allgather_ = pmr::Allgather<unsigned char>(*comm_, bytes);
            break;
        }
    }
    void release() override {
        barrier_ = pmr::Barrier();
        bcast_ = pmr::Broadcast<unsigned char>();
        allgather_ = pmr::Allgather<unsigned char>();
        comm_.reset();
    }

protected:
    void once() override {
        switch (kind_) {
        case Kind::barrier:
            barrier_();
            break;
        case Kind::bcast:
            bcast_();
            break;
        case Kind::allgather:
            allgather_();
            break;
        }
    }
    unsigned char* output() override {
        return kind_ == Kind::bcast ? bcast_.data() : allgather_.data();
    }
    unsigned char* input() override { return allgather_.input(); }

private:
    std::unique_ptr<pmr::Communicator> comm_;
    pmr::Barrier barrier_;
    pmr::Broadcast<unsigned char> bcast_;
    pmr::Allgather<unsigned char> allgather_;
};

class MpiCollective final : public CollectiveVariant {
public:
    MpiCollective(Kind kind, const Context& context)
        : CollectiveVariant(kind == Kind::barrier ? "mpi-barrier"
                            : kind == Kind::bcast ? "mpi-bcast"
                                                  : "mpi-allgather",
                            Family::mpi,
                            kind == Kind::barrier ? "MPI_Barrier"
                            : kind == Kind::bcast ? "MPI_Bcast, root 0"
                                                  : "MPI_Allgather, separate input",
                            kind, context) {}

    void prepare(std::size_t bytes) override {
        bytes_ = bytes;
        if (kind_ == Kind::bcast) {
            out_ = AlignedBuffer(bytes);
        } else if (kind_ == Kind::allgather) {
            out_ = AlignedBuffer(bytes * static_cast<std::size_t>(size_));
            in_ = AlignedBuffer(bytes);
        }
    }
    void release() override {
        out_ = AlignedBuffer();
        in_ = AlignedBuffer();
    }

protected:
    void once() override {
        const auto count = static_cast<int>(bytes_);
        switch (kind_) {
        case Kind::barrier:
            check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
            break;
        case Kind::bcast:
            check_mpi(MPI_Bcast(out_.data(), count, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
            break;
        case Kind::allgather:
            check_mpi(MPI_Allgather(in_.data(), count, MPI_BYTE, out_.data(), count, MPI_BYTE,
                                    MPI_COMM_WORLD),
                      "MPI_Allgather");
            break;
        }
    }
    unsigned char* output() override { return out_.data(); }
    unsigned char* input() override { return in_.data(); }

private:
    AlignedBuffer out_;
    AlignedBuffer in_;
};

class CollectiveBenchmark final : public Benchmark {
public:
    CollectiveBenchmark(Kind kind, const Context& context) : kind_(kind), size_(context.size) {
        auto pmr_variant = std::make_unique<PmrCollective>(kind, context);
        if (context.wants(pmr_variant->name())) {
            add(std::move(pmr_variant));
        }
        auto mpi_variant = std::make_unique<MpiCollective>(kind, context);
        if (context.wants(mpi_variant->name())) {
            add(std::move(mpi_variant));
        }
        if (kind == Kind::barrier && context.wants("sync-floor")) {
            if (auto floor = make_sync_floor(context)) {
                add(std::move(floor));
            }
        }
    }

    std::vector<std::pair<std::string, std::string>> describe() const override {
        const std::string ranks = " over " + std::to_string(size_) + " rank(s)";
        switch (kind_) {
        case Kind::barrier:
            return {{"barrier", "barrier" + ranks + " (the size is ignored)"}};
        case Kind::bcast:
            return {{"bcast", "broadcast of bytes from rank 0" + ranks}};
        case Kind::allgather:
            return {{"allgather", "allgather of a block of bytes per rank" + ranks +
                                      " (size: one rank's block)"}};
        }
        return {};
    }
    std::string time_meaning() const override {
        return "time of one collective call (slowest rank)";
    }
    /// The allgather delivers size blocks to every rank.
    double volume_factor() const override {
        return kind_ == Kind::allgather ? static_cast<double>(size_) : 1;
    }

private:
    Kind kind_;
    int size_;
};

void declare(Options& /*options*/) {}

std::unique_ptr<Benchmark> create_barrier(const Options& /*options*/, const Context& context) {
    return std::make_unique<CollectiveBenchmark>(Kind::barrier, context);
}
std::unique_ptr<Benchmark> create_bcast(const Options& /*options*/, const Context& context) {
    return std::make_unique<CollectiveBenchmark>(Kind::bcast, context);
}
std::unique_ptr<Benchmark> create_allgather(const Options& /*options*/, const Context& context) {
    return std::make_unique<CollectiveBenchmark>(Kind::allgather, context);
}

const bool registered_barrier = register_benchmark(
    {"barrier", "pmr::Barrier against MPI_Barrier", "0", declare, create_barrier});
const bool registered_bcast =
    register_benchmark({"bcast", "broadcast from rank 0: pmr::Broadcast against MPI_Bcast", "8:1M",
                        declare, create_bcast});
const bool registered_allgather = register_benchmark(
    {"allgather", "block of every rank to every rank: pmr::Allgather against MPI_Allgather",
     "8:256K", declare, create_allgather});

} // namespace
} // namespace pmr_bench
