// SPDX-License-Identifier: MIT
#include "mpi_exchange.hpp"

#include "exchange_variant.hpp"
#include "mpi_check.hpp"
#include "neighbor_init.hpp"

namespace pmr_bench {
namespace {

/// Point-to-point MPI, one send and one receive per neighbour, tagged by direction as pmr does
/// so the two messages between the ranks of a periodic pair cannot be confused.
class MpiPointToPoint final : public ExchangeVariant {
public:
    MpiPointToPoint(const HaloGrid& grid, bool buffered, bool persistent)
        : ExchangeVariant(persistent ? "mpi-persistent" : "mpi-isend", Family::mpi,
                          persistent ? "MPI_Send_init/MPI_Recv_init, MPI_Startall, MPI_Waitall"
                                     : "MPI_Irecv/MPI_Isend, MPI_Waitall",
                          grid, buffered),
          persistent_(persistent), comm_(grid.communicator().get()) {}

protected:
    void allocate(std::size_t bytes) override {
        count_ = static_cast<int>(bytes);
        const auto& neighbors = grid_.neighbors();
        for (std::size_t k = 0; k < neighbors.size(); ++k) {
            sends_.emplace_back(bytes);
            recvs_.emplace_back(bytes);
        }
        requests_.assign(2 * neighbors.size(), MPI_REQUEST_NULL);
        if (!persistent_) {
            return;
        }
        for (std::size_t k = 0; k < neighbors.size(); ++k) {
            const Neighbor& n = neighbors[k];
            check_mpi(MPI_Recv_init(recvs_[k].data(), count_, MPI_BYTE, n.rank, n.recv_channel(),
                                    comm_.get(), &requests_[k]),
                      "MPI_Recv_init");
            check_mpi(MPI_Send_init(sends_[k].data(), count_, MPI_BYTE, n.rank, n.send_channel(),
                                    comm_.get(), &requests_[neighbors.size() + k]),
                      "MPI_Send_init");
        }
    }

    void communicate() override {
        const auto& neighbors = grid_.neighbors();
        const int all = static_cast<int>(requests_.size());
        if (persistent_) {
            check_mpi(MPI_Startall(all, requests_.data()), "MPI_Startall");
        } else {
            for (std::size_t k = 0; k < neighbors.size(); ++k) {
                check_mpi(MPI_Irecv(recvs_[k].data(), count_, MPI_BYTE, neighbors[k].rank,
                                    neighbors[k].recv_channel(), comm_.get(), &requests_[k]),
                          "MPI_Irecv");
            }
            for (std::size_t k = 0; k < neighbors.size(); ++k) {
                check_mpi(MPI_Isend(sends_[k].data(), count_, MPI_BYTE, neighbors[k].rank,
                                    neighbors[k].send_channel(), comm_.get(),
                                    &requests_[neighbors.size() + k]),
                          "MPI_Isend");
            }
        }
        check_mpi(MPI_Waitall(all, requests_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    }

    void free() override {
        for (auto& r : requests_) {
            if (r != MPI_REQUEST_NULL) {
                MPI_Request_free(&r);
            }
        }
        requests_.clear();
        sends_.clear();
        recvs_.clear();
    }

    unsigned char* outgoing(std::size_t k) override { return sends_[k].data(); }
    unsigned char* incoming(std::size_t k) override { return recvs_[k].data(); }

private:
    bool persistent_;
    DupComm comm_;
    int count_ = 0;
    std::vector<AlignedBuffer> sends_;
    std::vector<AlignedBuffer> recvs_;
    std::vector<MPI_Request> requests_; ///< receives, then sends
};

enum class Collective { blocking, nonblocking, persistent };

/// MPI_Neighbor_alltoallv on (a duplicate of) the Cartesian communicator: one block per
/// neighbour in MPI's order, empty blocks for dimensions that are not exchanged.
class MpiNeighbor final : public ExchangeVariant {
public:
    MpiNeighbor(const HaloGrid& grid, bool buffered, Collective kind)
        : ExchangeVariant(name_of(kind), Family::mpi, description_of(kind), grid, buffered),
          kind_(kind), comm_(grid.communicator().get()) {}

    static std::string name_of(Collective kind) {
        switch (kind) {
        case Collective::blocking:
            return "mpi-neighbor";
        case Collective::nonblocking:
            return "mpi-ineighbor";
        case Collective::persistent:
            return "mpi-neighbor-init";
        }
        return "";
    }

protected:
    void allocate(std::size_t bytes) override {
        const auto blocks = 2 * static_cast<std::size_t>(grid_.dimensions());
        counts_.assign(blocks, 0);
        offsets_.assign(blocks, 0);
        for (std::size_t b = 0; b < blocks; ++b) {
            offsets_[b] = static_cast<int>(b * bytes);
        }
        for (const auto& n : grid_.neighbors()) {
            counts_[static_cast<std::size_t>(n.block())] = static_cast<int>(bytes);
        }
        send_ = AlignedBuffer(blocks * bytes);
        recv_ = AlignedBuffer(blocks * bytes);
        if (kind_ == Collective::persistent) {
            check_mpi(neighbor_alltoallv_init(send_.data(), counts_.data(), offsets_.data(),
                                              MPI_BYTE, recv_.data(), counts_.data(),
                                              offsets_.data(), MPI_BYTE, comm_.get(), MPI_INFO_NULL,
                                              &request_),
                      persistent_neighbor_alltoallv_name());
        }
    }

    void communicate() override {
        switch (kind_) {
        case Collective::blocking:
            check_mpi(MPI_Neighbor_alltoallv(send_.data(), counts_.data(), offsets_.data(),
                                             MPI_BYTE, recv_.data(), counts_.data(),
                                             offsets_.data(), MPI_BYTE, comm_.get()),
                      "MPI_Neighbor_alltoallv");
            return;
        case Collective::nonblocking:
            check_mpi(MPI_Ineighbor_alltoallv(send_.data(), counts_.data(), offsets_.data(),
                                              MPI_BYTE, recv_.data(), counts_.data(),
                                              offsets_.data(), MPI_BYTE, comm_.get(), &request_),
                      "MPI_Ineighbor_alltoallv");
            break;
        case Collective::persistent:
            check_mpi(MPI_Start(&request_), "MPI_Start");
            break;
        }
        check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
    }

    void free() override {
        if (request_ != MPI_REQUEST_NULL) {
            MPI_Request_free(&request_);
        }
        send_ = AlignedBuffer();
        recv_ = AlignedBuffer();
    }

    unsigned char* outgoing(std::size_t k) override { return block(send_, k); }
    unsigned char* incoming(std::size_t k) override { return block(recv_, k); }

private:
    static std::string description_of(Collective kind) {
        switch (kind) {
        case Collective::blocking:
            return "MPI_Neighbor_alltoallv on the Cartesian communicator";
        case Collective::nonblocking:
            return "MPI_Ineighbor_alltoallv, MPI_Wait";
        case Collective::persistent:
            return std::string(persistent_neighbor_alltoallv_name()) + ", MPI_Start, MPI_Wait";
        }
        return "";
    }

    unsigned char* block(AlignedBuffer& buffer, std::size_t k) {
        auto b = static_cast<std::size_t>(grid_.neighbors()[k].block());
        return buffer.data() + static_cast<std::size_t>(offsets_[b]);
    }

    Collective kind_;
    DupComm comm_;
    std::vector<int> counts_;
    std::vector<int> offsets_;
    AlignedBuffer send_;
    AlignedBuffer recv_;
    MPI_Request request_ = MPI_REQUEST_NULL;
};

} // namespace

std::vector<std::unique_ptr<Variant>> mpi_exchange_variants(const HaloGrid& grid, bool buffered,
                                                            const Context& context) {
    std::vector<std::unique_ptr<Variant>> variants;
    if (context.wants("mpi-persistent")) {
        variants.push_back(std::make_unique<MpiPointToPoint>(grid, buffered, true));
    }
    if (context.wants("mpi-isend")) {
        variants.push_back(std::make_unique<MpiPointToPoint>(grid, buffered, false));
    }
    std::vector<Collective> kinds = {Collective::blocking, Collective::nonblocking};
    if (persistent_neighbor_alltoallv_name() != nullptr) {
        kinds.push_back(Collective::persistent);
    }
    for (Collective kind : kinds) {
        if (context.wants(MpiNeighbor::name_of(kind))) {
            variants.push_back(std::make_unique<MpiNeighbor>(grid, buffered, kind));
        }
    }
    return variants;
}

} // namespace pmr_bench
