// SPDX-License-Identifier: MIT
#include "base/environment.hpp"
#include "base/error.hpp"
#include "bootstrap/mpi_process.hpp"
#include "bootstrap/setup_link.hpp"

#include <pmr/communicator.hpp>
#include <pmr/target.hpp>

#include <numeric>
#include <string>
#include <utility>

namespace pmr {
using detail::bootstrap::require_mpi;

Communicator::Communicator(MPI_Comm comm) : comm_(comm) {
    require_mpi("Communicator");
    if (comm == MPI_COMM_NULL) {
        detail::raise<ArgumentError>("the communicator is MPI_COMM_NULL", "Communicator");
    }
    read_grid();
    record_ = detail::CommunicatorRecord::create(comm_, false);
}

Communicator::Communicator(MPI_Comm comm, std::vector<int> dims, std::vector<bool> periodic,
                           bool reorder) {
    require_mpi("Communicator");
    if (comm == MPI_COMM_NULL) {
        detail::raise<ArgumentError>("the communicator is MPI_COMM_NULL", "Communicator");
    }
    const auto n = static_cast<int>(dims.size());
    if (n == 0) {
        detail::raise<ArgumentError>("a Cartesian grid needs at least one dimension",
                                     "Communicator");
    }
    if (periodic.empty()) {
        periodic.assign(dims.size(), false);
    }
    if (periodic.size() != dims.size()) {
        detail::raise<ArgumentError>("periodic has " + std::to_string(periodic.size()) +
                                         " entries for " + std::to_string(n) + " dimensions",
                                     "Communicator", "Give one periodicity per dimension.");
    }
    int size = 0;
    MPI_Comm_size(comm, &size);
    for (int d : dims) {
        if (d < 0) {
            detail::raise<ArgumentError>("negative grid extent", "Communicator");
        }
    }
    // MPI_Dims_create aborts on a grid that cannot work, so check first: the fixed extents must
    // divide the size (and equal it when none is left to MPI).
    int fixed = 1;
    bool free_extent = false;
    for (int d : dims) {
        fixed *= d > 0 ? d : 1;
        free_extent = free_extent || d == 0;
    }
    const bool fits = free_extent ? size % fixed == 0 : fixed == size;
    if (!fits || MPI_Dims_create(size, n, dims.data()) != MPI_SUCCESS ||
        std::accumulate(dims.begin(), dims.end(), 1, std::multiplies<>()) != size) {
        std::string grid;
        for (int d : dims) {
            grid += (grid.empty() ? "" : " x ") + std::to_string(d);
        }
        detail::raise<ArgumentError>("grid " + grid + " does not match the " +
                                         std::to_string(size) + " ranks of the communicator",
                                     "Communicator",
                                     "The product of the extents must equal the number of ranks "
                                     "(0 entries are filled in by MPI_Dims_create).");
    }
    std::vector<int> periods(periodic.begin(), periodic.end());
    if (MPI_Cart_create(comm, n, dims.data(), periods.data(), reorder ? 1 : 0, &comm_) !=
        MPI_SUCCESS) {
        detail::raise<BootstrapError>("MPI_Cart_create failed", "Communicator");
    }
    try {
        read_grid();
        record_ = detail::CommunicatorRecord::create(comm_, true);
    } catch (...) {
        MPI_Comm_free(&comm_);
        throw;
    }
}

Communicator::Communicator(Communicator&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)), record_(std::move(other.record_)),
      rank_(other.rank_), size_(other.size_), dims_(std::move(other.dims_)),
      periodic_(std::move(other.periodic_)), coords_(std::move(other.coords_)) {}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
    if (this != &other) {
        comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
        record_ = std::move(other.record_);
        rank_ = other.rank_;
        size_ = other.size_;
        dims_ = std::move(other.dims_);
        periodic_ = std::move(other.periodic_);
        coords_ = std::move(other.coords_);
    }
    return *this;
}

// The record frees the communicators pmr made once nothing uses them any more.
Communicator::~Communicator() = default;

void Communicator::read_grid() {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    int topology = MPI_UNDEFINED;
    MPI_Topo_test(comm_, &topology);
    if (topology != MPI_CART) {
        return;
    }
    int n = 0;
    MPI_Cartdim_get(comm_, &n);
    dims_.assign(static_cast<std::size_t>(n), 0);
    std::vector<int> periods(static_cast<std::size_t>(n), 0);
    coords_.assign(static_cast<std::size_t>(n), 0);
    MPI_Cart_get(comm_, n, dims_.data(), periods.data(), coords_.data());
    periodic_.assign(periods.begin(), periods.end());
}

void Communicator::check_dimension(int dimension) const {
    if (comm_ == MPI_COMM_NULL) {
        detail::raise<UsageError>("use of a moved-from Communicator", "Communicator");
    }
    if (dims_.empty()) {
        detail::raise<UsageError>("the communicator has no Cartesian grid",
                                  "Communicator rank " + std::to_string(rank_),
                                  "Construct it with Communicator(comm, dims, periodic).");
    }
    if (dimension < 0 || dimension >= dimensions()) {
        detail::raise<ArgumentError>("dimension " + std::to_string(dimension) + " is not in [0, " +
                                         std::to_string(dimensions()) + ")",
                                     "Communicator rank " + std::to_string(rank_));
    }
}

int Communicator::size(int dimension) const {
    check_dimension(dimension);
    return dims_[static_cast<std::size_t>(dimension)];
}

bool Communicator::periodic(int dimension) const {
    check_dimension(dimension);
    return periodic_[static_cast<std::size_t>(dimension)];
}

int Communicator::coordinate(int dimension) const {
    check_dimension(dimension);
    return coords_[static_cast<std::size_t>(dimension)];
}

int Communicator::neighbor(int dimension, int direction) const {
    check_dimension(dimension);
    if (direction != -1 && direction != 1) {
        detail::raise<ArgumentError>("direction " + std::to_string(direction) +
                                         " is neither -1 nor +1",
                                     "Communicator rank " + std::to_string(rank_));
    }
    // Computed from the grid rather than MPI_Cart_shift so the answer never depends on how an MPI
    // library orders the two neighbours of a size-2 periodic dimension.
    const auto d = static_cast<std::size_t>(dimension);
    int extent = dims_[d];
    int coordinate = coords_[d] + direction;
    if (coordinate < 0 || coordinate >= extent) {
        if (!periodic_[d]) {
            return MPI_PROC_NULL;
        }
        coordinate = (coordinate + extent) % extent;
    }
    std::vector<int> coords = coords_;
    coords[d] = coordinate;
    int rank = MPI_PROC_NULL;
    MPI_Cart_rank(comm_, coords.data(), &rank);
    return rank;
}

Target Communicator::target(int dimension, int direction, int tag_offset) const {
    int peer = neighbor(dimension, direction);
    const int up = 2 * dimension + 1 + tag_offset;
    const int down = 2 * dimension + tag_offset;
    return direction > 0 ? Target(*this, peer, up, down) : Target(*this, peer, down, up);
}

} // namespace pmr
