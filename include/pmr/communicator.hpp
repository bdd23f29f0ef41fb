// SPDX-License-Identifier: MIT
/// @file communicator.hpp
/// An MPI communicator, optionally with a Cartesian grid, that hands out the Target of the
/// neighbour in every direction.
#pragma once

#include <mpi.h>

#include <vector>

namespace pmr {

class Target;

/// Wraps an MPI communicator. Constructing with a grid creates a Cartesian communicator (collective
/// over `comm`) that this object owns and frees; wrapping an existing communicator never frees it.
///
/// Neighbour targets use tags `2 * dimension + (direction > 0)` for sending and the opposite for
/// receiving, so the connection to the upper neighbour always pairs with the neighbour's connection
/// to its lower neighbour -- also when both are the same rank (periodic dimension of size 2) or the
/// own rank (periodic dimension of size 1).
class Communicator {
public:
    /// Wraps `comm`. If `comm` is Cartesian, its grid is used for neighbour().
    /// @throws BootstrapError if MPI is not initialised or `comm` is invalid.
    explicit Communicator(MPI_Comm comm);

    /// Creates a Cartesian grid over `comm`. Entries of `dims` that are 0 are filled in by
    /// `MPI_Dims_create`. `periodic` has one entry per dimension (empty: none periodic).
    /// Collective over `comm`.
    /// @throws ArgumentError if `periodic` has the wrong length or the grid does not match the
    /// size.
    Communicator(MPI_Comm comm, std::vector<int> dims, std::vector<bool> periodic = {},
                 bool reorder = false);

    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;
    Communicator(Communicator&& other) noexcept;
    Communicator& operator=(Communicator&& other) noexcept;
    ~Communicator();

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

private:
    void read_grid();
    void check_dimension(int dimension) const;

    MPI_Comm comm_ = MPI_COMM_NULL;
    bool owned_ = false;
    int rank_ = 0;
    int size_ = 0;
    std::vector<int> dims_;
    std::vector<bool> periodic_;
    std::vector<int> coords_;
};

} // namespace pmr
