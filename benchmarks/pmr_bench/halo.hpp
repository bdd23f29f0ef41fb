// SPDX-License-Identifier: MIT
/// @file halo.hpp
/// The Cartesian grid of a halo exchange and the neighbours every rank exchanges with, shared by
/// pmr and every MPI baseline so that they move exactly the same messages.
#pragma once

#include "buffer.hpp"

#include <pmr/communicator.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace pmr_bench {

/// One message a rank sends and one it receives: to and from the neighbour in `direction`.
struct Neighbor {
    int dimension = 0;
    int direction = 0;        ///< -1 (lower) or +1 (upper)
    int rank = MPI_PROC_NULL; ///< in the grid communicator; MPI_PROC_NULL at a border
    /// Channel (and MPI tag) of what this rank sends toward the neighbour, as pmr's Communicator
    /// numbers its tags: 2 d + (direction > 0). The neighbour receives it on its channel for the
    /// opposite direction, so what arrives *from* this neighbour was sent on recv_channel().
    int send_channel() const { return 2 * dimension + (direction > 0 ? 1 : 0); }
    int recv_channel() const { return 2 * dimension + (direction > 0 ? 0 : 1); }
    /// Index of the block for this neighbour in MPI's Cartesian neighbour order
    /// (d0 lower, d0 upper, d1 lower, ...), for sending and receiving alike.
    int block() const { return send_channel(); }
    bool is_null() const { return rank == MPI_PROC_NULL; }
};

/// The grid of --dims/--geom/--periodic and the neighbours of this rank: both directions of every
/// distributed dimension (extent > 1), and of every dimension with `local`.
class HaloGrid {
public:
    /// Collective over `comm`. Extents 0 are filled in by MPI_Dims_create.
    HaloGrid(MPI_Comm comm, const std::vector<int>& extents, bool periodic, bool local);

    const pmr::Communicator& communicator() const noexcept { return cart_; }
    const std::vector<Neighbor>& neighbors() const noexcept { return neighbors_; }
    int rank() const noexcept { return cart_.rank(); }
    int dimensions() const noexcept { return cart_.dimensions(); }
    bool periodic() const noexcept { return periodic_; }
    /// Largest number of messages one rank sends per exchange (non-null neighbours), over all
    /// ranks.
    int busiest_sends() const noexcept { return busiest_sends_; }
    /// Whether an exchanged periodic dimension has extent 2 (or 1): both neighbours are then the
    /// same rank, and only the tags (pmr, point-to-point MPI) or the block order (neighbourhood
    /// collectives) tell the two messages apart.
    bool has_periodic_pair() const;
    /// "2 x 1 x 1, periodic".
    std::string describe() const;

private:
    pmr::Communicator cart_;
    bool periodic_;
    std::vector<Neighbor> neighbors_;
    int busiest_sends_ = 0;
};

/// Application-side copies of the halo for --buffered: the data lives in a field, is packed into
/// the send buffer before and unpacked from the receive buffer after every exchange, as codes do
/// that gather strided halos (here contiguous copies: the cheapest case of that cost).
struct HaloField {
    std::vector<AlignedBuffer> outgoing; ///< per neighbour
    std::vector<AlignedBuffer> incoming; ///< per neighbour
    void resize(std::size_t neighbors, std::size_t bytes);
    void clear();
};

} // namespace pmr_bench
