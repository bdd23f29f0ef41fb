// SPDX-License-Identifier: MIT
/// @file stencil3d.cpp
/// A 3D heat solver (Jacobi iteration, 7-point stencil) on a Cartesian grid of ranks, run twice:
/// once with the halos exchanged by persistent MPI requests and once by pmr windows. The two final
/// fields must be equal bit for bit.
///
/// Every rank owns a box of nx x ny x nz cells surrounded by one layer of ghost cells. Each
/// iteration packs the six boundary faces of the box into contiguous buffers, sends each to the
/// neighbour on that side, unpacks what the neighbours sent into the ghost layers and then updates
/// the interior. At a non-periodic border the neighbour is MPI_PROC_NULL: nothing arrives and the
/// ghost layer keeps its initial value, a fixed-temperature boundary.
///
/// The two halo exchanges have the same interface (`exchange(Field&)`) and the solver is a template
/// over it, so the arithmetic is the same machine code in both runs: any difference in the result
/// is a difference in the halos.
///
///     mpirun -np 8 pmr-stencil3d --size 64 --iterations 200 --periodic 1

#include <pmr/pmr.hpp>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr int dimensions = 3;
/// Six faces: face `2 * d` is the lower side of dimension d, face `2 * d + 1` the upper side.
constexpr int faces = 2 * dimensions;

using Extents = std::array<int, dimensions>;

int dimension_of(int face) {
    return face / 2;
}
int direction_of(int face) {
    return face % 2 == 0 ? -1 : +1;
}
/// The face of the neighbour that touches this face: data sent through `face` arrives there.
int opposite(int face) {
    return face ^ 1;
}

const char* const usage = R"(usage: mpirun -np P pmr-stencil3d [options]

3D Jacobi heat solver with halos exchanged by persistent MPI requests and by pmr windows;
checks that both give bitwise equal results and prints both times.

options:
  --size N|NX,NY,NZ     local box per rank in cells (default 32)
  --grid PX,PY,PZ       ranks per dimension, 0 = let MPI_Dims_create choose (default 0,0,0)
  --periodic P|PX,PY,PZ 1 = periodic dimension, 0 = fixed boundary (default 0)
  --iterations N        Jacobi iterations (default 100)
  --repeat N            solve N times with each, alternating MPI and pmr; the fastest of each
                        counts (default 1; more gives steadier times on a busy machine)
  --csv                 print one CSV line (header first) instead of the report
  --help                print this text
)";

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------

/// A mistake on the command line: every rank sees the same arguments, so every rank throws it.
class CommandLineError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Options {
    Extents box{32, 32, 32};
    Extents grid{0, 0, 0};
    Extents periodic{0, 0, 0};
    int iterations = 100;
    int repeat = 1;
    bool csv = false;
    bool help = false;
};

int parse_integer(const std::string& option, const std::string& text, int minimum, int maximum) {
    std::size_t end = 0;
    long long value = 0;
    try {
        value = std::stoll(text, &end);
    } catch (const std::exception&) {
        end = 0;
    }
    if (end == 0 || end != text.size() || value < minimum || value > maximum) {
        throw CommandLineError(option + " expects integers in [" + std::to_string(minimum) + ", " +
                               std::to_string(maximum) + "], not '" + text + "'");
    }
    return static_cast<int>(value);
}

/// "8" means 8 in every dimension, "8,4,2" one value per dimension.
Extents parse_extents(const std::string& option, const std::string& text, int minimum,
                      int maximum) {
    std::vector<int> values;
    std::size_t begin = 0;
    while (true) {
        const auto comma = text.find(',', begin);
        values.push_back(
            parse_integer(option, text.substr(begin, comma - begin), minimum, maximum));
        if (comma == std::string::npos) {
            break;
        }
        begin = comma + 1;
    }
    if (values.size() == 1) {
        return {values[0], values[0], values[0]};
    }
    if (values.size() != dimensions) {
        throw CommandLineError(option + " expects 1 or 3 comma-separated values, not '" + text +
                               "'");
    }
    return {values[0], values[1], values[2]};
}

Options parse_options(int argc, char** argv) {
    // Accept both "--name value" and "--name=value".
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const auto equals = arg.find('=');
        if (arg.rfind("--", 0) == 0 && equals != std::string::npos) {
            args.push_back(arg.substr(0, equals));
            args.push_back(arg.substr(equals + 1));
        } else {
            args.push_back(arg);
        }
    }

    // The box is limited so that face sizes and MPI counts stay well inside int.
    constexpr int max_box = 4096;
    constexpr int max_int = 1 << 30;
    Options options;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& name = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) {
                throw CommandLineError(name + " needs a value");
            }
            return args[++i];
        };
        if (name == "--help" || name == "-h") {
            options.help = true;
        } else if (name == "--size") {
            options.box = parse_extents(name, value(), 1, max_box);
        } else if (name == "--grid") {
            options.grid = parse_extents(name, value(), 0, max_int);
        } else if (name == "--periodic") {
            options.periodic = parse_extents(name, value(), 0, 1);
        } else if (name == "--iterations") {
            options.iterations = parse_integer(name, value(), 0, max_int);
        } else if (name == "--repeat") {
            options.repeat = parse_integer(name, value(), 1, 1000);
        } else if (name == "--csv") {
            options.csv = true;
        } else {
            throw CommandLineError("unknown option '" + name + "'");
        }
    }
    const auto cells =
        static_cast<long long>(options.box[0] + 2) * (options.box[1] + 2) * (options.box[2] + 2);
    if (cells > (1LL << 31)) {
        throw CommandLineError("--size: the box of " + std::to_string(cells) +
                               " cells (with ghosts) is too large for this example");
    }
    return options;
}

// ---------------------------------------------------------------------------------------------
// The local field and its faces
// ---------------------------------------------------------------------------------------------

/// The local box with one layer of ghost cells: interior cells have coordinates 1..n in each
/// dimension, ghosts 0 and n + 1. The last dimension is contiguous.
class Field {
public:
    explicit Field(const Extents& interior) : interior_(interior) {
        strides_[2] = 1;
        strides_[1] = static_cast<std::size_t>(interior[2] + 2);
        strides_[0] = strides_[1] * static_cast<std::size_t>(interior[1] + 2);
        values_.resize(strides_[0] * static_cast<std::size_t>(interior[0] + 2));
    }

    std::size_t index(int i, int j, int k) const {
        return static_cast<std::size_t>(i) * strides_[0] +
               static_cast<std::size_t>(j) * strides_[1] + static_cast<std::size_t>(k);
    }
    double& operator[](std::size_t index) { return values_[index]; }
    double operator[](std::size_t index) const { return values_[index]; }

    const Extents& interior() const { return interior_; }
    const std::array<std::size_t, dimensions>& strides() const { return strides_; }
    const std::vector<double>& values() const { return values_; }
    /// Takes the values of a field of the same extents.
    void assign(const Field& other) {
        std::copy(other.values_.begin(), other.values_.end(), values_.begin());
    }

    /// Number of cells of a face normal to `dimension`.
    std::size_t face_cells(int dimension) const {
        std::size_t cells = 1;
        for (int d = 0; d < dimensions; ++d) {
            if (d != dimension) {
                cells *= static_cast<std::size_t>(interior_[d]);
            }
        }
        return cells;
    }

private:
    Extents interior_;
    std::array<std::size_t, dimensions> strides_{};
    std::vector<double> values_;
};

/// Calls `visit(cell_index, position)` for the cells of the layer at coordinate `layer` of
/// dimension `dimension`, interior cells only, with positions 0, 1, 2, ... Every rank walks a face
/// in the same order, so position p of a packed face lands on the ghost cell next to it.
template <class Visit>
void for_each_face_cell(const Field& field, int dimension, int layer, Visit visit) {
    // The two dimensions within the face, slower one first.
    const int a = dimension == 0 ? 1 : 0;
    const int b = dimension == 2 ? 1 : 2;
    const auto& n = field.interior();
    const auto& stride = field.strides();
    const std::size_t base = static_cast<std::size_t>(layer) * stride[dimension];
    std::size_t position = 0;
    for (int ia = 1; ia <= n[a]; ++ia) {
        for (int ib = 1; ib <= n[b]; ++ib) {
            visit(base + static_cast<std::size_t>(ia) * stride[a] +
                      static_cast<std::size_t>(ib) * stride[b],
                  position++);
        }
    }
}

/// Copies the outermost interior layer on side `face` into `buffer`.
void pack(const Field& field, int face, double* buffer) {
    const int d = dimension_of(face);
    const int layer = direction_of(face) < 0 ? 1 : field.interior()[d];
    for_each_face_cell(field, d, layer, [&](std::size_t cell, std::size_t position) {
        buffer[position] = field[cell];
    });
}

/// Copies `buffer`, the face the neighbour on side `face` sent, into the ghost layer on that side.
void unpack(Field& field, int face, const double* buffer) {
    const int d = dimension_of(face);
    const int layer = direction_of(face) < 0 ? 0 : field.interior()[d] + 1;
    for_each_face_cell(field, d, layer, [&](std::size_t cell, std::size_t position) {
        field[cell] = buffer[position];
    });
}

// ---------------------------------------------------------------------------------------------
// Halo exchange with persistent MPI requests: the reference
// ---------------------------------------------------------------------------------------------

class MpiHalo {
public:
    MpiHalo(const pmr::Communicator& cart, const Field& field) {
        for (int face = 0; face < faces; ++face) {
            const int d = dimension_of(face);
            const std::size_t cells = field.face_cells(d);
            const int count = static_cast<int>(cells);
            neighbors_[face] = cart.neighbor(d, direction_of(face));
            send_buffers_[face].resize(cells);
            recv_buffers_[face].resize(cells);
            // The tag is the face a message leaves through. Between the two neighbours of a
            // periodic dimension of size 2 (the same rank twice) or of size 1 (the own rank)
            // two messages travel in opposite directions, and only the tag tells them apart.
            MPI_Recv_init(recv_buffers_[face].data(), count, MPI_DOUBLE, neighbors_[face],
                          opposite(face), cart, &requests_[face]);
            MPI_Send_init(send_buffers_[face].data(), count, MPI_DOUBLE, neighbors_[face], face,
                          cart, &requests_[faces + face]);
        }
    }
    MpiHalo(const MpiHalo&) = delete;
    MpiHalo& operator=(const MpiHalo&) = delete;
    ~MpiHalo() {
        for (auto& request : requests_) {
            MPI_Request_free(&request);
        }
    }

    void exchange(Field& field) {
        for (int face = 0; face < faces; ++face) {
            pack(field, face, send_buffers_[face].data());
        }
        MPI_Startall(static_cast<int>(requests_.size()), requests_.data());
        MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
        for (int face = 0; face < faces; ++face) {
            // Nothing arrives from MPI_PROC_NULL: keep the boundary values in the ghost layer.
            if (neighbors_[face] != MPI_PROC_NULL) {
                unpack(field, face, recv_buffers_[face].data());
            }
        }
    }

private:
    std::array<int, faces> neighbors_{};
    std::array<std::vector<double>, faces> send_buffers_;
    std::array<std::vector<double>, faces> recv_buffers_;
    /// Receives first, so that MPI_Startall posts them before the sends.
    std::array<MPI_Request, 2 * faces> requests_{};
};

// ---------------------------------------------------------------------------------------------
// Halo exchange with pmr
// ---------------------------------------------------------------------------------------------

class PmrHalo {
public:
    PmrHalo(const pmr::Communicator& cart, const Field& field) {
        connections_.reserve(faces);
        sends_.reserve(faces);
        recvs_.reserve(faces);
        for (int face = 0; face < faces; ++face) {
            // cart.target() picks the tags so that our connection to the upper neighbour pairs
            // with its connection to its lower neighbour, also when both are the same rank
            // (periodic size 2) or this rank itself (periodic size 1).
            connections_.emplace_back(cart.target(dimension_of(face), direction_of(face)));
        }
        for (int face = 0; face < faces; ++face) {
            // One send and one receive window per connection: our send window on the upper
            // connection pairs with the upper neighbour's receive window on its lower one.
            // Library-owned windows: pmr chooses memory its transports reach fastest.
            const std::size_t cells = field.face_cells(dimension_of(face));
            sends_.emplace_back(connections_[face], cells);
            recvs_.emplace_back(connections_[face], cells);
        }
    }

    void exchange(Field& field) {
        // Grant every receive buffer first: a neighbour's data can only move once we have granted
        // the buffer it goes to, so granting early lets it flow while we are still packing.
        for (auto& recv : recvs_) {
            recv.init();
        }
        for (int face = 0; face < faces; ++face) {
            // Packing straight into the window saves the copy into a separate MPI buffer.
            pack(field, face, sends_[face].data());
            sends_[face].init();
            sends_[face].post();
        }
        for (auto& recv : recvs_) {
            recv.post();
        }
        for (auto& send : sends_) {
            send.wait();
        }
        for (int face = 0; face < faces; ++face) {
            recvs_[face].wait();
            // A null connection (MPI_PROC_NULL) delivers nothing: keep the boundary values.
            if (!connections_[face].target().is_null()) {
                unpack(field, face, recvs_[face].data());
            }
        }
    }

    /// "-x self, +x shm, ..." for the report.
    std::string providers() {
        static const char* const names[] = {"-x", "+x", "-y", "+y", "-z", "+z"};
        std::string text;
        for (int face = 0; face < faces; ++face) {
            text += std::string(face == 0 ? "" : ", ") + names[face] + " " +
                    std::string(pmr::to_string(connections_[face].provider()));
        }
        return text;
    }

private:
    std::vector<pmr::Connection> connections_;
    std::vector<pmr::SendWindow<double>> sends_;
    std::vector<pmr::RecvWindow<double>> recvs_;
};

// ---------------------------------------------------------------------------------------------
// Solver
// ---------------------------------------------------------------------------------------------

/// Smooth but direction-dependent initial temperature, evaluated on global cell coordinates, so a
/// face sent the wrong way or to the wrong place changes the result.
double initial_value(long long x, long long y, long long z) {
    const auto fx = static_cast<double>(x);
    const auto fy = static_cast<double>(y);
    const auto fz = static_cast<double>(z);
    return std::sin(0.31 * fx + 0.17) * std::cos(0.23 * fy - 0.4) + 0.01 * fz +
           0.5 * std::sin(0.07 * fx * fz + 0.11 * fy);
}

/// Fills the whole box, ghosts included: at a fixed boundary the ghost value stays forever.
void initialize(Field& field, const Extents& coordinates) {
    const auto& n = field.interior();
    for (int i = 0; i <= n[0] + 1; ++i) {
        for (int j = 0; j <= n[1] + 1; ++j) {
            for (int k = 0; k <= n[2] + 1; ++k) {
                // Global coordinate of the cell; ghosts lie one outside the own range.
                const long long x = static_cast<long long>(coordinates[0]) * n[0] + i - 1;
                const long long y = static_cast<long long>(coordinates[1]) * n[1] + j - 1;
                const long long z = static_cast<long long>(coordinates[2]) * n[2] + k - 1;
                field[field.index(i, j, k)] = initial_value(x, y, z);
            }
        }
    }
}

/// One Jacobi step of the heat equation: next = u + alpha * (discrete Laplacian of u).
void jacobi_step(const Field& u, Field& next) {
    constexpr double alpha = 0.125; // stable for alpha <= 1/6
    const auto& n = u.interior();
    const std::size_t sx = u.strides()[0];
    const std::size_t sy = u.strides()[1];
    for (int i = 1; i <= n[0]; ++i) {
        for (int j = 1; j <= n[1]; ++j) {
            const std::size_t row = u.index(i, j, 0);
            for (std::size_t c = row + 1; c <= row + static_cast<std::size_t>(n[2]); ++c) {
                const double laplacian = u[c - sx] + u[c + sx] + u[c - sy] + u[c + sy] + u[c - 1] +
                                         u[c + 1] - 6.0 * u[c];
                next[c] = u[c] + alpha * laplacian;
            }
        }
    }
}

/// Wall time of a solve: the whole iterations, and the part of them spent in the halo exchange
/// (packing, communication and unpacking), both of the slowest rank.
struct Timing {
    double total = 0.0;
    double exchange = 0.0;
    double exchange_share() const { return total > 0.0 ? exchange / total : 0.0; }
};

/// Runs `iterations` steps on `u` and returns the times of the slowest rank.
template <class Halo>
Timing solve(Halo& halo, Field& u, int iterations, MPI_Comm comm) {
    // The ghosts of `next` must hold the boundary values too, as the two fields swap roles.
    Field next = u;

    // One untimed exchange: pmr completes its connection handshakes on first use, and MPI may
    // set up its own paths lazily too. It does not change the result: the first timed iteration
    // exchanges the same faces again.
    halo.exchange(u);
    MPI_Barrier(comm);

    // Two clock reads per iteration (some 50 ns) tell the exchange from the compute.
    double times[2] = {0.0, 0.0}; // whole, exchange
    const double start = MPI_Wtime();
    for (int iteration = 0; iteration < iterations; ++iteration) {
        const double before = MPI_Wtime();
        halo.exchange(u);
        times[1] += MPI_Wtime() - before;
        jacobi_step(u, next);
        std::swap(u, next);
    }
    times[0] = MPI_Wtime() - start;
    MPI_Allreduce(MPI_IN_PLACE, times, 2, MPI_DOUBLE, MPI_MAX, comm);
    return {times[0], times[1]};
}

/// The faster of two timings (by their whole time).
Timing faster(const Timing& a, const Timing& b) {
    return b.total < a.total ? b : a;
}

/// Sum of the interior cells over all ranks (total heat, conserved if every dimension is
/// periodic).
double checksum(const Field& field, MPI_Comm comm) {
    const auto& n = field.interior();
    double sum = 0.0;
    for (int i = 1; i <= n[0]; ++i) {
        for (int j = 1; j <= n[1]; ++j) {
            for (int k = 1; k <= n[2]; ++k) {
                sum += field[field.index(i, j, k)];
            }
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
    return sum;
}

/// Number of cells (ghosts included) whose bits differ; reports the first one.
long long count_differences(const Field& a, const Field& b, int rank) {
    long long differences = 0;
    const auto& n = a.interior();
    for (int i = 0; i <= n[0] + 1; ++i) {
        for (int j = 0; j <= n[1] + 1; ++j) {
            for (int k = 0; k <= n[2] + 1; ++k) {
                const std::size_t c = a.index(i, j, k);
                // memcmp, not ==: "bitwise equal" also distinguishes -0.0 from 0.0 and NaNs.
                if (std::memcmp(&a.values()[c], &b.values()[c], sizeof(double)) != 0) {
                    if (differences == 0) {
                        std::fprintf(stderr,
                                     "rank %d: first difference at local cell (%d, %d, %d): "
                                     "MPI %.17g, pmr %.17g\n",
                                     rank, i, j, k, a[c], b[c]);
                    }
                    ++differences;
                }
            }
        }
    }
    return differences;
}

std::string join(const std::vector<int>& values, const char* separator) {
    std::string text;
    for (std::size_t i = 0; i < values.size(); ++i) {
        text += (i == 0 ? "" : separator) + std::to_string(values[i]);
    }
    return text;
}

/// Runs both solves and returns the exit code.
int run(const Options& options) {
    const std::vector<int> grid(options.grid.begin(), options.grid.end());
    const std::vector<bool> periodic{options.periodic[0] != 0, options.periodic[1] != 0,
                                     options.periodic[2] != 0};
    pmr::Communicator cart(MPI_COMM_WORLD, grid, periodic);
    const int rank = cart.rank();
    const Extents coordinates{cart.coordinate(0), cart.coordinate(1), cart.coordinate(2)};

    Field initial(options.box);
    initialize(initial, coordinates);
    const double initial_sum = checksum(initial, cart);

    // Each solve starts from the initial field; the halo objects are made once, as applications
    // do, and the solves alternate so that a busy machine slows both alike.
    Field mpi_field = initial;
    Field pmr_field = initial;
    Timing mpi_time{1e300, 0.0};
    Timing pmr_time{1e300, 0.0};
    std::string providers;
    {
        MpiHalo mpi_halo(cart, mpi_field);
        PmrHalo pmr_halo(cart, pmr_field);
        providers = pmr_halo.providers();
        for (int round = 0; round < options.repeat; ++round) {
            if (round > 0) {
                mpi_field.assign(initial);
                pmr_field.assign(initial);
            }
            mpi_time = faster(mpi_time, solve(mpi_halo, mpi_field, options.iterations, cart));
            pmr_time = faster(pmr_time, solve(pmr_halo, pmr_field, options.iterations, cart));
        }
    }

    long long differences = count_differences(mpi_field, pmr_field, rank);
    MPI_Allreduce(MPI_IN_PLACE, &differences, 1, MPI_LONG_LONG, MPI_SUM, cart);
    const double final_sum = checksum(pmr_field, cart);

    if (rank == 0 && options.csv) {
        std::printf("example,ranks,cells_per_rank,iterations,mpi_ms_per_iteration,"
                    "pmr_ms_per_iteration,mpi_over_pmr,mpi_exchange_share,pmr_exchange_share,"
                    "bitwise_equal\n");
        const double per_iteration = options.iterations > 0 ? 1e3 / options.iterations : 0.0;
        std::printf("stencil3d,%d,%s,%d,%.6f,%.6f,%.4f,%.4f,%.4f,%d\n", cart.size(),
                    join(std::vector<int>(options.box.begin(), options.box.end()), "x").c_str(),
                    options.iterations, mpi_time.total * per_iteration,
                    pmr_time.total * per_iteration,
                    pmr_time.total > 0.0 ? mpi_time.total / pmr_time.total : 0.0,
                    mpi_time.exchange_share(), pmr_time.exchange_share(), differences == 0 ? 1 : 0);
    } else if (rank == 0) {
        std::vector<int> periodic_flags;
        for (int d = 0; d < dimensions; ++d) {
            periodic_flags.push_back(cart.periodic(d) ? 1 : 0);
        }
        const double per_iteration = options.iterations > 0 ? 1e3 / options.iterations : 0.0;
        std::printf("pmr stencil3d: %d rank%s as a %s grid (periodic %s), %s cells per rank, "
                    "%d iterations\n",
                    cart.size(), cart.size() == 1 ? "" : "s", join(cart.extents(), " x ").c_str(),
                    join(periodic_flags, ",").c_str(),
                    join(std::vector<int>(options.box.begin(), options.box.end()), " x ").c_str(),
                    options.iterations);
        std::printf("  providers of rank 0  %s\n", providers.c_str());
        if (options.repeat > 1) {
            std::printf("  fastest of %d alternating solves each\n", options.repeat);
        }
        std::printf("  MPI persistent       %10.6f s  %10.4f ms/iteration  exchange %5.1f %%\n",
                    mpi_time.total, mpi_time.total * per_iteration,
                    100.0 * mpi_time.exchange_share());
        std::printf("  pmr windows          %10.6f s  %10.4f ms/iteration  exchange %5.1f %%\n",
                    pmr_time.total, pmr_time.total * per_iteration,
                    100.0 * pmr_time.exchange_share());
        if (pmr_time.total > 0.0) {
            std::printf("  time MPI / pmr       %10.3f\n", mpi_time.total / pmr_time.total);
        }
        std::printf("  checksum             %.15e (initial %.15e)\n", final_sum, initial_sum);
        if (differences == 0) {
            std::printf("  MPI and pmr results are bitwise equal on every rank\n");
        } else {
            std::printf("  MISMATCH: %lld cells differ between the MPI and the pmr result\n",
                        differences);
        }
    }
    return differences == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    int status = 0;
    try {
        const Options options = parse_options(argc, argv);
        if (options.help) {
            if (rank == 0) {
                std::printf("%s", usage);
            }
        } else {
            status = run(options);
        }
    } catch (const CommandLineError& error) {
        if (rank == 0) {
            std::fprintf(stderr, "pmr-stencil3d: %s\n\n%s", error.what(), usage);
        }
        status = 2;
    } catch (const pmr::Error& error) {
        // Neighbours may be blocked in a wait for this rank: abort the whole job rather than hang.
        std::fprintf(stderr, "rank %d: pmr error: %s\n", rank, error.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    } catch (const std::exception& error) {
        std::fprintf(stderr, "rank %d: error: %s\n", rank, error.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return status;
}
