// SPDX-License-Identifier: MIT
/// @file communicator.hpp
/// An MPI communicator, optionally with a Cartesian grid, that hands out the Target of the
/// neighbour in every direction.
#pragma once

#include <mpi.h>

#include <array>
#include <memory>
#include <vector>

namespace pmr {

class Target;

namespace detail {
struct CommunicatorRecord;
} // namespace detail

/// Wraps an MPI communicator for pmr. Both constructors are collective over `comm`: they learn
/// once which ranks share a node (so that every connection made from this communicator knows its
/// provider at construction and creates the resources of that provider only), and duplicate the
/// communicator for pmr's set-up messages, so that they never meet the application's messages.
/// Constructing with a grid creates a Cartesian communicator that this object owns; wrapping an
/// existing communicator never frees it. The communicators pmr made live as long as this object or
/// anything made from it (targets, connections, windows), whichever is last: a Communicator may go
/// out of scope before the connections made from it are used. Ranks keep their order: rank() is
/// the rank in `comm` unless `reorder` is set.
///
/// Neighbour targets use tags `2 * dimension + (direction > 0)` for sending and the opposite for
/// receiving, so the connection to the upper neighbour always pairs with the neighbour's connection
/// to its lower neighbour -- also when both are the same rank (periodic dimension of size 2) or the
/// own rank (periodic dimension of size 1).
class Communicator {
public:
    /// Wraps `comm`. If `comm` is Cartesian, its grid is used for neighbour(). Collective over
    /// `comm`.
    /// @throws BootstrapError if MPI is not initialised or `comm` is invalid.
    explicit Communicator(MPI_Comm comm);

    /// Creates a Cartesian grid over `comm`. Entries of `dims` that are 0 are filled in by
    /// `MPI_Dims_create`. `periodic` has one entry per dimension (empty: none periodic).
    /// Collective over `comm`.
    /// @throws ArgumentError if `periodic` has the wrong length or the grid does not match the
    /// size.
    Communicator(MPI_Comm comm, std::vector<int> dims, std::vector<bool> periodic = {},
                 bool reorder = false);

    /// Deprecated spelling of `pmr::tofu::virtual_torus` (<pmr/tofu.hpp>), which it calls; kept
    /// for one release.
    [[deprecated("use pmr::tofu::virtual_torus from <pmr/tofu.hpp>")]] static Communicator
    virtual_torus(MPI_Comm comm, const std::array<int, 3>& dims);

    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;
    Communicator(Communicator&& other) noexcept;
    Communicator& operator=(Communicator&& other) noexcept;
    ~Communicator();

    /// The communicator (the Cartesian one if this object made a grid); null after a move.
    MPI_Comm get() const noexcept { return comm_; }
    operator MPI_Comm() const noexcept { return comm_; } // NOLINT(google-explicit-constructor)
    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }

    /// Number of grid dimensions (0 if not Cartesian).
    int dimensions() const noexcept { return static_cast<int>(dims_.size()); }
    /// Extent of the grid in `dimension`.
    int size(int dimension) const;
    bool periodic(int dimension) const;
    /// Own coordinate in `dimension`.
    int coordinate(int dimension) const;
    const std::vector<int>& coordinates() const noexcept { return coords_; }
    const std::vector<int>& extents() const noexcept { return dims_; }

    /// Rank of the neighbour in `dimension`, `direction` -1 (lower) or +1 (upper); MPI_PROC_NULL at
    /// a non-periodic boundary.
    /// @throws ArgumentError for a bad dimension or direction, UsageError if there is no grid.
    int neighbor(int dimension, int direction) const;

    /// Target of the neighbour in `dimension` and `direction` (-1 or +1), see the class comment for
    /// the tags. `tag_offset` is added to both tags, to keep several exchanges on one grid apart.
    Target target(int dimension, int direction, int tag_offset = 0) const;

    /// @cond internal
    const std::shared_ptr<detail::CommunicatorRecord>& record() const noexcept { return record_; }
    /// @endcond

private:
    void read_grid();
    void check_dimension(int dimension) const;

    MPI_Comm comm_ = MPI_COMM_NULL;
    std::shared_ptr<detail::CommunicatorRecord> record_;
    int rank_ = 0;
    int size_ = 0;
    std::vector<int> dims_;
    std::vector<bool> periodic_;
    std::vector<int> coords_;
};

} // namespace pmr
