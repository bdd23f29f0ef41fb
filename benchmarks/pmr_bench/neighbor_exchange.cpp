// SPDX-License-Identifier: MIT
/// @file neighbor_exchange.cpp
/// pmr-direct, pmr-split, pmr-auto: the exchange of pmr-owned, made by pmr::NeighborExchange with
/// each algorithm (library-owned buffers). On one rail all three equal direct; the difference to
/// pmr-owned is the module's own cost.

#include "neighbor_exchange.hpp"

#include "exchange_variant.hpp"

#include <pmr/neighbor.hpp>

#include <optional>

namespace pmr_bench {
namespace {

class ModuleExchange final : public ExchangeVariant {
public:
    ModuleExchange(const HaloGrid& grid, bool buffered, pmr::NeighborAlgorithm algorithm,
                   const std::string& name, int tag_offset)
        : ExchangeVariant(name, Family::pmr,
                          "pmr::NeighborExchange, algorithm " +
                              std::string(pmr::to_string(algorithm)) + " (library-owned buffers)",
                          grid, buffered),
          algorithm_(algorithm), tag_offset_(tag_offset) {}

protected:
    void allocate(std::size_t bytes) override {
        std::vector<pmr::Neighbor> list;
        for (const Neighbor& n : grid_.neighbors()) {
            list.push_back({n.rank, bytes, bytes, n.send_channel() + tag_offset_,
                            n.recv_channel() + tag_offset_});
        }
        pmr::NeighborOptions options;
        options.algorithm = algorithm_;
        exchange_.emplace(grid_.communicator(), list, options);
        // The buffers are fixed for the exchange's life: taken once, as a code would.
        outgoing_.clear();
        incoming_.clear();
        for (std::size_t k = 0; k < list.size(); ++k) {
            outgoing_.push_back(exchange_->send(k).data());
            incoming_.push_back(exchange_->recv(k).data());
        }
    }

    void communicate() override {
        exchange_->start();
        exchange_->wait();
    }

    void free() override { exchange_.reset(); }

    unsigned char* outgoing(std::size_t k) override { return outgoing_[k]; }
    unsigned char* incoming(std::size_t k) override { return incoming_[k]; }

private:
    pmr::NeighborAlgorithm algorithm_;
    int tag_offset_;
    std::optional<pmr::NeighborExchange<unsigned char>> exchange_;
    std::vector<unsigned char*> outgoing_;
    std::vector<unsigned char*> incoming_;
};

} // namespace

std::vector<std::unique_ptr<Variant>>
neighbor_exchange_variants(const HaloGrid& grid, bool buffered, const Context& context) {
    std::vector<std::unique_ptr<Variant>> variants;
    const struct {
        const char* name;
        pmr::NeighborAlgorithm algorithm;
    } all[] = {{"pmr-direct", pmr::NeighborAlgorithm::direct},
               {"pmr-split", pmr::NeighborAlgorithm::split},
               {"pmr-auto", pmr::NeighborAlgorithm::automatic}};
    const int tags_per_exchange = 2 * grid.dimensions();
    int k = 0;
    for (const auto& v : all) {
        ++k;
        if (context.wants(v.name)) {
            variants.push_back(std::make_unique<ModuleExchange>(grid, buffered, v.algorithm, v.name,
                                                                k * tags_per_exchange));
        }
    }
    return variants;
}

} // namespace pmr_bench
