// SPDX-License-Identifier: MIT
#include "halo.hpp"

#include "mpi_check.hpp"
#include "options.hpp"

namespace pmr_bench {

namespace {
std::vector<int> filled_extents(MPI_Comm comm, const std::vector<int>& given) {
    std::vector<int> extents = given;
    int size = 1;
    MPI_Comm_size(comm, &size);
    long product = 1;
    bool open = false;
    for (int e : given) {
        if (e < 0) {
            throw UsageError("--geom: extents must be positive (0: let MPI choose)");
        }
        open = open || e == 0;
        product *= e == 0 ? 1 : e;
    }
    if (product <= 0 || size % product != 0 || (!open && product != size)) {
        throw UsageError("--geom: a grid of " + std::to_string(product) + " ranks does not fit " +
                         std::to_string(size) + " ranks");
    }
    check_mpi(MPI_Dims_create(size, static_cast<int>(extents.size()), extents.data()),
              "MPI_Dims_create");
    return extents;
}
} // namespace

HaloGrid::HaloGrid(MPI_Comm comm, const std::vector<int>& extents, bool periodic, bool local)
    : cart_(comm, filled_extents(comm, extents), std::vector<bool>(extents.size(), periodic)),
      periodic_(periodic) {
    for (int d = 0; d < cart_.dimensions(); ++d) {
        if (cart_.size(d) == 1 && !local) {
            continue;
        }
        for (int direction : {-1, +1}) {
            neighbors_.push_back({d, direction, cart_.neighbor(d, direction)});
        }
    }
    int sends = 0;
    for (const auto& n : neighbors_) {
        sends += n.is_null() ? 0 : 1;
    }
    check_mpi(MPI_Allreduce(&sends, &busiest_sends_, 1, MPI_INT, MPI_MAX, comm), "MPI_Allreduce");
}

bool HaloGrid::has_periodic_pair() const {
    for (const auto& n : neighbors_) {
        if (periodic_ && cart_.size(n.dimension) <= 2) {
            return true;
        }
    }
    return false;
}

std::string HaloGrid::describe() const {
    std::string text;
    for (int d = 0; d < cart_.dimensions(); ++d) {
        text += (d ? " x " : "") + std::to_string(cart_.size(d));
    }
    return text + (periodic_ ? ", periodic" : ", not periodic");
}

void HaloField::resize(std::size_t neighbors, std::size_t bytes) {
    clear();
    for (std::size_t k = 0; k < neighbors; ++k) {
        outgoing.emplace_back(bytes);
        incoming.emplace_back(bytes);
    }
}

void HaloField::clear() {
    outgoing.clear();
    incoming.clear();
}

} // namespace pmr_bench
