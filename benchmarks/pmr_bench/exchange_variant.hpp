// SPDX-License-Identifier: MIT
/// @file exchange_variant.hpp
/// Base of every halo-exchange variant (pmr and MPI alike): one round is pack, communicate,
/// unpack, with the same --buffered copies and the same verification for all of them, so that
/// variants differ only in how the messages move.
#pragma once

#include "benchmark.hpp"
#include "halo.hpp"

#include <cstring>
#include <string>
#include <utility>

namespace pmr_bench {

/// What every exchange variant shares: the neighbours, --buffered packing and verification.
/// A variant supplies its buffers and the communication itself.
class ExchangeVariant : public Variant {
public:
    ExchangeVariant(std::string name, Family family, std::string description, const HaloGrid& grid,
                    bool buffered)
        : Variant(std::move(name), family, std::move(description)), grid_(grid),
          buffered_(buffered) {}

    void prepare(std::size_t bytes) override {
        bytes_ = bytes;
        if (buffered_) {
            field_.resize(grid_.neighbors().size(), bytes);
        }
        allocate(bytes);
    }

    void run(std::size_t iterations) override {
        for (std::size_t i = 0; i < iterations; ++i) {
            pack();
            communicate();
            unpack();
            next_round();
        }
    }

    void release() override {
        free();
        field_.clear();
    }

protected:
    virtual void allocate(std::size_t bytes) = 0;
    virtual void communicate() = 0;
    virtual void free() = 0;
    /// Send and receive buffer of the message to and from neighbour `k`.
    virtual unsigned char* outgoing(std::size_t k) = 0;
    virtual unsigned char* incoming(std::size_t k) = 0;

    const HaloGrid& grid_;
    std::size_t bytes_ = 0;

private:
    const std::vector<Neighbor>& neighbors() const { return grid_.neighbors(); }

    void pack() {
        for (std::size_t k = 0; k < neighbors().size(); ++k) {
            const Neighbor& n = neighbors()[k];
            if (n.is_null()) {
                continue;
            }
            unsigned char* source = buffered_ ? field_.outgoing[k].data() : outgoing(k);
            if (verifying()) {
                fill(source, bytes_, grid_.rank(), n.send_channel());
            }
            if (buffered_ && bytes_ > 0) {
                std::memcpy(outgoing(k), source, bytes_);
            }
        }
    }

    void unpack() {
        for (std::size_t k = 0; k < neighbors().size(); ++k) {
            const Neighbor& n = neighbors()[k];
            if (n.is_null()) {
                continue;
            }
            unsigned char* target = buffered_ ? field_.incoming[k].data() : incoming(k);
            if (buffered_ && bytes_ > 0) {
                std::memcpy(target, incoming(k), bytes_);
            }
            if (verifying()) {
                std::string where =
                    std::string("message from the ") + (n.direction < 0 ? "lower" : "upper") +
                    " neighbour in dimension " + std::to_string(n.dimension) + " (rank " +
                    std::to_string(n.rank) + ") at rank " + std::to_string(grid_.rank());
                check(target, bytes_, n.rank, n.recv_channel(), where, n.send_channel());
            }
        }
    }

    bool buffered_;
    HaloField field_;
};

} // namespace pmr_bench
