// SPDX-License-Identifier: MIT
/// @file exchange.cpp
/// `pmr-bench exchange`: the halo exchange of stencil and lattice codes. Every rank of a Cartesian
/// grid sends one message to and receives one from both neighbours in every distributed
/// dimension, per iteration. pmr (owned and user windows, and the neighbour-exchange module with
/// each algorithm) against MPI persistent send/recv,
/// Isend/Irecv and the neighbourhood collective MPI_Neighbor_alltoallv (blocking, non-blocking and,
/// where MPI has it, persistent), interleaved per sample.

#include "exchange_variant.hpp"
#include "mpi_exchange.hpp"
#include "neighbor_exchange.hpp"

#include <cstring>
#include <vector>

namespace pmr_bench {
namespace {

/// pmr: one connection per neighbour (Communicator::target), one send and one receive window on it.
class PmrExchange final : public ExchangeVariant {
public:
    PmrExchange(const Context& context, const HaloGrid& grid, bool buffered, bool owned,
                int tag_offset)
        : ExchangeVariant(owned ? "pmr-owned" : "pmr-user", Family::pmr,
                          owned ? "pmr windows in library-owned memory"
                                : "pmr windows over user buffers (ordinary heap memory)",
                          grid, buffered),
          owned_(owned) {
        for (const auto& n : grid.neighbors()) {
            connections_.push_back(
                context.connect(grid.communicator().target(n.dimension, n.direction, tag_offset)));
        }
    }

    void count_providers(ProviderCounts& counts) override {
        for (auto& c : connections_) {
            counts[static_cast<std::size_t>(c.provider())] += 1;
        }
    }

protected:
    void allocate(std::size_t bytes) override {
        sends_.reserve(connections_.size());
        recvs_.reserve(connections_.size());
        for (auto& c : connections_) {
            if (owned_) {
                sends_.emplace_back(c, bytes);
                recvs_.emplace_back(c, bytes);
            } else {
                user_.emplace_back(bytes);
                sends_.emplace_back(c, user_.back().data(), bytes);
                user_.emplace_back(bytes);
                recvs_.emplace_back(c, user_.back().data(), bytes);
            }
        }
    }

    void communicate() override {
        for (auto& r : recvs_) {
            r.init();
        }
        for (auto& s : sends_) {
            s.init();
        }
        for (auto& s : sends_) {
            s.post();
        }
        for (auto& r : recvs_) {
            r.post();
        }
        for (auto& s : sends_) {
            s.wait();
        }
        for (auto& r : recvs_) {
            r.wait();
        }
    }

    void free() override {
        sends_.clear();
        recvs_.clear();
        user_.clear();
    }

    unsigned char* outgoing(std::size_t k) override { return sends_[k].data(); }
    unsigned char* incoming(std::size_t k) override { return recvs_[k].data(); }

private:
    bool owned_;
    std::vector<pmr::Connection> connections_;
    std::vector<AlignedBuffer> user_;
    std::vector<pmr::SendWindow<unsigned char>> sends_;
    std::vector<pmr::RecvWindow<unsigned char>> recvs_;
};

/// The reference: no communication, every rank copies each of its outgoing messages into the
/// matching receive buffer of its own with std::memcpy. A transport that moves every byte once
/// (pmr's shared memory, MPI's cross-memory attach) cannot beat this by much once the messages
/// outgrow the caches, so its ratio to this line tells how much is left to gain.
class CopyReference final : public ExchangeVariant {
public:
    CopyReference(const HaloGrid& grid, bool buffered)
        : ExchangeVariant("memcpy", Family::reference,
                          "reference, no communication: each rank memcpy's its outgoing messages "
                          "into its own receive buffers (the bound of a single copy; not checked)",
                          grid, buffered) {}

protected:
    void allocate(std::size_t bytes) override {
        for (std::size_t k = 0; k < grid_.neighbors().size(); ++k) {
            sends_.emplace_back(bytes);
            recvs_.emplace_back(bytes);
        }
    }

    void communicate() override {
        if (bytes_ == 0) {
            return;
        }
        for (std::size_t k = 0; k < grid_.neighbors().size(); ++k) {
            if (!grid_.neighbors()[k].is_null()) {
                std::memcpy(recvs_[k].data(), sends_[k].data(), bytes_);
            }
        }
    }

    void free() override {
        sends_.clear();
        recvs_.clear();
    }

    unsigned char* outgoing(std::size_t k) override { return sends_[k].data(); }
    unsigned char* incoming(std::size_t k) override { return recvs_[k].data(); }

private:
    std::vector<AlignedBuffer> sends_;
    std::vector<AlignedBuffer> recvs_;
};

std::vector<int> extents_from(const Options& options) {
    long dims = options.integer("dims");
    std::vector<int> extents;
    if (options.given("geom")) {
        for (const auto& word : options.values("geom")) {
            extents.push_back(static_cast<int>(parse_size(word)));
        }
        if (!options.given("dims")) {
            dims = static_cast<long>(extents.size());
        }
    }
    if (dims < 1 || dims > 4) {
        throw UsageError("--dims must be 1, 2, 3 or 4");
    }
    if (extents.empty()) {
        extents.assign(static_cast<std::size_t>(dims), 0);
    }
    if (extents.size() != static_cast<std::size_t>(dims)) {
        throw UsageError("--geom needs " + std::to_string(dims) + " extents for --dims " +
                         std::to_string(dims));
    }
    return extents;
}

class Exchange final : public Benchmark {
public:
    Exchange(const Options& options, const Context& context)
        : grid_(context.world, extents_from(options), options.flag("periodic"),
                options.flag("local")),
          buffered_(options.flag("buffered")) {
        const int tags_per_exchange = 2 * grid_.dimensions();
        if (context.wants("pmr-owned")) {
            add(std::make_unique<PmrExchange>(context, grid_, buffered_, true, 0));
        }
        if (context.wants("pmr-user")) {
            add(std::make_unique<PmrExchange>(context, grid_, buffered_, false, tags_per_exchange));
        }
        for (auto& variant : neighbor_exchange_variants(grid_, buffered_, context)) {
            add(std::move(variant));
        }
        for (auto& variant : mpi_exchange_variants(grid_, buffered_, context)) {
            // Neighbourhood collectives order blocks by direction, not by tag (see notes()).
            neighbor_collectives_ =
                neighbor_collectives_ || variant->name().find("neighbor") != std::string::npos;
            add(std::move(variant));
        }
        if (context.wants("memcpy")) {
            add(std::make_unique<CopyReference>(grid_, buffered_));
        }
    }

    /// The pmr connections name the grid's communicator: they go before the grid frees it.
    ~Exchange() override { variants().clear(); }

    std::vector<std::pair<std::string, std::string>> describe() const override {
        std::string mine;
        for (const auto& n : grid_.neighbors()) {
            mine += (mine.empty() ? "" : ", ") + std::string(n.direction < 0 ? "-" : "+") +
                    std::to_string(n.dimension) + ": " +
                    (n.is_null() ? std::string("none") : "rank " + std::to_string(n.rank));
        }
        return {{"grid", grid_.describe()},
                {"neighbours of rank 0", mine.empty() ? "(none)" : mine},
                {"messages",
                 std::to_string(grid_.busiest_sends()) + " sent per exchange by the busiest rank"},
                {"copies", buffered_ ? "pack before and unpack after every exchange (--buffered)"
                                     : "none: data sent from and received into the buffers"}};
    }
    std::string time_meaning() const override {
        return "time per halo exchange, all messages of the slowest rank";
    }
    double volume_factor() const override { return grid_.busiest_sends(); }
    std::vector<std::string> notes() const override {
        std::vector<std::string> notes;
        if (neighbor_collectives_ && grid_.has_periodic_pair()) {
            notes.emplace_back(
                "A periodic dimension has extent 2 (or 1), so both neighbours are the same rank. "
                "Open MPI's non-blocking and persistent neighbourhood collectives are known to "
                "swap the two blocks in this case; every variant's data is checked once per size "
                "(every round with --verify) and wrong results are listed above.");
        }
        return notes;
    }

private:
    HaloGrid grid_;
    bool buffered_;
    bool neighbor_collectives_ = false;
};

void declare(Options& options) {
    options.declare("dims", Arity::one, "N", "grid dimensions, 1 to 4", {"1"});
    options.declare("geom", Arity::many, "X [Y [Z [T]]]",
                    "ranks per dimension, 0: chosen by MPI_Dims_create [0 ...]");
    options.declare("periodic", Arity::flag, "", "periodic boundaries in every dimension");
    options.declare("local", Arity::flag, "",
                    "exchange in dimensions of extent 1 too (self, or null if not periodic)");
    options.declare("buffered", Arity::flag, "",
                    "pack into the send buffers before and unpack after every exchange");
}

std::unique_ptr<Benchmark> create(const Options& options, const Context& context) {
    return std::make_unique<Exchange>(options, context);
}

const bool registered = register_benchmark(
    {"exchange", "halo exchange with both neighbours in every dimension of a Cartesian grid",
     "8:16M", declare, create});

} // namespace
} // namespace pmr_bench
