// SPDX-License-Identifier: MIT
/// @file halo4d.cpp
/// The halo exchange of a lattice-QCD Wilson-Dirac operator on a 4D grid of ranks, through pmr.
///
/// Every site of the local lattice holds a Wilson spinor: 4 spins x 3 colours, complex, 24 reals.
/// The hopping term of the Wilson-Dirac operator at site x reads
///
///     sum_mu  U_mu(x) (1 - gamma_mu) psi(x + mu)  +  U_mu(x - mu)^+ (1 + gamma_mu) psi(x - mu)
///
/// so a rank needs, from the neighbour above in dimension mu, (1 - gamma_mu) psi on that
/// neighbour's lower face, and from the neighbour below, (1 + gamma_mu) psi on its upper face.
/// A projected spinor has only two independent spin components (a half-spinor, 12 reals): lattice
/// codes project before they communicate and send half the data. This example does exactly that
/// for the 8 faces (4 dimensions x 2 directions), through one pmr connection per face, and checks
/// every received value against the value computed from the neighbour's global coordinates. (Real
/// codes also multiply by the gauge link U^+ before sending backwards; that changes the
/// arithmetic, not the communication, and is left out.)
///
/// The field is a deterministic function of global site and iteration, recomputed every
/// iteration, so stale or misplaced data is caught. Its values are small multiples of 1/64, exact
/// in float and double, and so are their projections: the check compares bit for bit.
///
///     mpirun -np 16 pmr-halo4d --size 8 --iterations 1000 --precision single

#include <pmr/pmr.hpp>

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int dimensions = 4;
constexpr int spins = 4;
constexpr int colours = 3;
/// Reals per site: a full spinor, and a spin-projected half-spinor as sent.
constexpr int spinor_reals = spins * colours * 2;
constexpr int half_spinor_reals = spinor_reals / 2;

using Coordinates = std::array<int, dimensions>;

const char* const usage = R"(usage: mpirun -np P pmr-halo4d [options]

Halo exchange of spin-projected Wilson spinors on a 4D lattice with pmr; verifies every
received value and prints the time per iteration and the bandwidth.

options:
  --size L|X,Y,Z,T          local lattice per rank in sites (default 8)
  --grid PX,PY,PZ,PT        ranks per dimension, 0 = let MPI_Dims_create choose (default 0)
  --periodic P|PX,PY,PZ,PT  1 = periodic dimension, 0 = open boundary (default 1)
  --iterations N            timed exchanges (default 100)
  --checks N                exchanges of a new field each, every value verified (default 3)
  --precision single|double floating-point type of the field (default double)
  --help                    print this text
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
    Coordinates lattice{8, 8, 8, 8};
    Coordinates grid{0, 0, 0, 0};
    Coordinates periodic{1, 1, 1, 1};
    int iterations = 100;
    int checks = 3;
    bool single = false;
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

/// "8" means 8 in every dimension, "8,8,8,16" one value per dimension.
Coordinates parse_coordinates(const std::string& option, const std::string& text, int minimum,
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
        return {values[0], values[0], values[0], values[0]};
    }
    if (values.size() != dimensions) {
        throw CommandLineError(option + " expects 1 or 4 comma-separated values, not '" + text +
                               "'");
    }
    return {values[0], values[1], values[2], values[3]};
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

    constexpr int max_extent = 1024;
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
            options.lattice = parse_coordinates(name, value(), 1, max_extent);
        } else if (name == "--grid") {
            options.grid = parse_coordinates(name, value(), 0, max_int);
        } else if (name == "--periodic") {
            options.periodic = parse_coordinates(name, value(), 0, 1);
        } else if (name == "--iterations") {
            options.iterations = parse_integer(name, value(), 1, max_int);
        } else if (name == "--checks") {
            options.checks = parse_integer(name, value(), 0, max_int);
        } else if (name == "--precision") {
            const std::string& precision = value();
            if (precision != "single" && precision != "double") {
                throw CommandLineError("--precision expects single or double, not '" + precision +
                                       "'");
            }
            options.single = precision == "single";
        } else {
            throw CommandLineError("unknown option '" + name + "'");
        }
    }
    long long sites = 1;
    for (int extent : options.lattice) {
        sites *= extent;
    }
    if (sites > (1LL << 26)) {
        throw CommandLineError("--size: " + std::to_string(sites) +
                               " sites per rank are too many for this example");
    }
    return options;
}

// ---------------------------------------------------------------------------------------------
// Lattice geometry and the field
// ---------------------------------------------------------------------------------------------

/// Lexicographic index of site `x` in a lattice of `extent`, x fastest (the usual QCD order).
std::size_t site_index(const Coordinates& x, const Coordinates& extent) {
    std::size_t index = 0;
    for (int mu = dimensions - 1; mu >= 0; --mu) {
        index = index * static_cast<std::size_t>(extent[mu]) + static_cast<std::size_t>(x[mu]);
    }
    return index;
}

std::size_t volume(const Coordinates& extent) {
    std::size_t sites = 1;
    for (int e : extent) {
        sites *= static_cast<std::size_t>(e);
    }
    return sites;
}

/// Calls `visit(x)` for the sites begin <= x < end, in lexicographic order (x[0] fastest).
template <class Visit>
void for_each_site(const Coordinates& begin, const Coordinates& end, Visit visit) {
    Coordinates x{};
    for (x[3] = begin[3]; x[3] < end[3]; ++x[3]) {
        for (x[2] = begin[2]; x[2] < end[2]; ++x[2]) {
            for (x[1] = begin[1]; x[1] < end[1]; ++x[1]) {
                for (x[0] = begin[0]; x[0] < end[0]; ++x[0]) {
                    visit(x);
                }
            }
        }
    }
}

/// Calls `visit(x, position)` for the local sites with x[mu] == layer, positions 0, 1, 2, ... in
/// lexicographic order of the other three coordinates. Sender and receiver walk a face in the same
/// order, so position p on one side is the nearest neighbour of position p on the other.
template <class Visit>
void for_each_face_site(const Coordinates& extent, int mu, int layer, Visit visit) {
    Coordinates begin{0, 0, 0, 0};
    Coordinates end = extent;
    begin[mu] = layer;
    end[mu] = layer + 1;
    std::size_t position = 0;
    for_each_site(begin, end, [&](const Coordinates& x) { visit(x, position++); });
}

/// Real number `component` (0..23: spin-major, then colour, then real/imaginary) of the spinor at
/// global site `global` in iteration `iteration`. A hash of all three, mapped to k/64 with
/// |k| <= 1019: exactly representable in float, and so are sums and differences of two.
template <class Real>
Real spinor_value(const Coordinates& global, const Coordinates& global_extent, int component,
                  int iteration) {
    // Unsigned: wraps around on huge lattices instead of overflowing, and stays deterministic.
    const std::uint64_t site = site_index(global, global_extent);
    const std::uint64_t hash =
        (site * spinor_reals + static_cast<std::uint64_t>(component)) * 7919 +
        static_cast<std::uint64_t>(iteration) * 104729;
    const auto k = static_cast<int>(hash % 2039) - 1019;
    return static_cast<Real>(k) / static_cast<Real>(64);
}

/// (1 + sign * gamma_mu) psi in the DeGrand-Rossi basis (Chroma, QUDA) keeps only spin
/// components 0 and 1: h_s = psi_s + sign * c_s * psi_{p_s}, with partner spin p_s and a
/// coefficient c_s in {1, -1, i, -i}. The lower two spin components of the projected spinor follow
/// from h_0 and h_1, so the receiver can rebuild them and they are not sent.
struct Projection {
    std::array<int, 2> partner;
    std::array<int, 2> coefficient_re;
    std::array<int, 2> coefficient_im;
};

constexpr std::array<Projection, dimensions> projections{{
    {{3, 2}, {0, 0}, {1, 1}},  // gamma_x: h0 = psi0 +- i psi3, h1 = psi1 +- i psi2
    {{3, 2}, {-1, 1}, {0, 0}}, // gamma_y: h0 = psi0 -+ psi3,   h1 = psi1 +- psi2
    {{2, 3}, {0, 0}, {1, -1}}, // gamma_z: h0 = psi0 +- i psi2, h1 = psi1 -+ i psi3
    {{2, 3}, {1, 1}, {0, 0}},  // gamma_t: h0 = psi0 +- psi2,   h1 = psi1 +- psi3
}};

/// Writes the 12 reals of (1 + sign * gamma_mu) psi, spin 0..1 x colour x re/im, to `half`.
template <class Real>
void project(const Real* psi, int mu, int sign, Real* half) {
    const Projection& p = projections[mu];
    for (int s = 0; s < 2; ++s) {
        const auto re = static_cast<Real>(sign * p.coefficient_re[s]);
        const auto im = static_cast<Real>(sign * p.coefficient_im[s]);
        for (int c = 0; c < colours; ++c) {
            const Real* a = psi + (s * colours + c) * 2;
            const Real* b = psi + (p.partner[s] * colours + c) * 2;
            Real* h = half + (s * colours + c) * 2;
            h[0] = a[0] + (re * b[0] - im * b[1]);
            h[1] = a[1] + (re * b[1] + im * b[0]);
        }
    }
}

/// The local lattice of one rank, its place in the global lattice, and the spinor field on it.
template <class Real>
class Lattice {
public:
    Lattice(const Coordinates& extent, const pmr::Communicator& cart) : extent_(extent) {
        for (int mu = 0; mu < dimensions; ++mu) {
            offset_[mu] = cart.coordinate(mu) * extent[mu];
            global_extent_[mu] = cart.size(mu) * extent[mu];
        }
        field_.resize(volume(extent) * spinor_reals);
    }

    const Coordinates& extent() const { return extent_; }

    /// Global coordinates of local site `x`, shifted by `shift` sites in dimension `mu` and wrapped
    /// around the global lattice (only reached across a periodic border).
    Coordinates global(const Coordinates& x, int mu = 0, int shift = 0) const {
        Coordinates g{};
        for (int nu = 0; nu < dimensions; ++nu) {
            g[nu] = offset_[nu] + x[nu] + (nu == mu ? shift : 0);
            g[nu] = (g[nu] % global_extent_[nu] + global_extent_[nu]) % global_extent_[nu];
        }
        return g;
    }

    /// Sets the field to its value in `iteration`.
    void fill(int iteration) {
        for_each_site({0, 0, 0, 0}, extent_, [&](const Coordinates& x) {
            Real* psi = spinor(x);
            const Coordinates g = global(x);
            for (int component = 0; component < spinor_reals; ++component) {
                psi[component] = spinor_value<Real>(g, global_extent_, component, iteration);
            }
        });
    }

    /// The half-spinor the neighbour in direction `direction` of `mu` sends for our boundary
    /// site `x`, computed here from the neighbour site's global coordinates.
    void expected_half_spinor(const Coordinates& x, int mu, int direction, int iteration,
                              Real* half) const {
        const Coordinates g = global(x, mu, direction);
        std::array<Real, spinor_reals> psi{};
        for (int component = 0; component < spinor_reals; ++component) {
            psi[component] = spinor_value<Real>(g, global_extent_, component, iteration);
        }
        // Data coming from above was projected with (1 - gamma), from below with (1 + gamma).
        project(psi.data(), mu, -direction, half);
    }

    Real* spinor(const Coordinates& x) { return &field_[site_index(x, extent_) * spinor_reals]; }
    const Real* spinor(const Coordinates& x) const {
        return &field_[site_index(x, extent_) * spinor_reals];
    }

private:
    Coordinates extent_;
    Coordinates offset_{};
    Coordinates global_extent_{};
    std::vector<Real> field_;
};

// ---------------------------------------------------------------------------------------------
// The halo exchange
// ---------------------------------------------------------------------------------------------

/// One of the 8 faces: the connection to the neighbour on that side, the windows the half-spinors
/// travel through, and the ghost zone they are unpacked into.
template <class Real>
struct Face {
    Face(const pmr::Communicator& cart, int dimension, int side, std::size_t reals)
        : mu(dimension), direction(side),
          // cart.target() chooses the tags so that this connection pairs with the neighbour's
          // connection for the opposite direction, also when the neighbour is this rank
          // (periodic size 1) or the same rank on both sides (periodic size 2).
          connection(cart.target(dimension, side)),
          // Library-owned windows, in memory that pmr's transports reach by their fastest path.
          // Our send window here pairs with the neighbour's receive window for -direction.
          send(connection, reals), recv(connection, reals), ghost(reals) {}

    int mu;
    int direction;
    pmr::Connection connection;
    pmr::SendWindow<Real> send;
    pmr::RecvWindow<Real> recv;
    std::vector<Real> ghost;

    /// Coordinate of our sites on this face.
    int layer(const Coordinates& extent) const { return direction < 0 ? 0 : extent[mu] - 1; }
    bool is_null() const { return connection.target().is_null(); }
};

template <class Real>
class Halo {
public:
    Halo(const pmr::Communicator& cart, const Lattice<Real>& lattice) {
        faces_.reserve(2 * dimensions);
        for (int mu = 0; mu < dimensions; ++mu) {
            const std::size_t face_sites = volume(lattice.extent()) / lattice.extent()[mu];
            for (int direction : {-1, +1}) {
                faces_.emplace_back(cart, mu, direction, face_sites * half_spinor_reals);
            }
        }
    }

    /// Projects, sends, receives and unpacks all 8 faces.
    void exchange(const Lattice<Real>& lattice) {
        // Grant every receive buffer first: a neighbour's data can only move once we have granted
        // the buffer it goes to, so granting early lets it flow while we are still packing.
        for (auto& face : faces_) {
            face.recv.init();
        }
        for (auto& face : faces_) {
            pack(lattice, face);
            face.send.init();
            face.send.post();
        }
        for (auto& face : faces_) {
            face.recv.post();
        }
        for (auto& face : faces_) {
            face.send.wait();
        }
        for (auto& face : faces_) {
            face.recv.wait();
            // A null connection (open boundary) delivers nothing.
            if (!face.is_null()) {
                face.ghost.assign(face.recv.begin(), face.recv.end());
            }
        }
    }

    /// Compares every ghost value with the expected one and returns the number of wrong reals;
    /// reports the first one if `report` is set.
    long long verify(const Lattice<Real>& lattice, int iteration, int rank, bool report) const {
        long long errors = 0;
        for (const auto& face : faces_) {
            if (face.is_null()) {
                continue;
            }
            auto check_site = [&](const Coordinates& x, std::size_t position) {
                std::array<Real, half_spinor_reals> expected{};
                lattice.expected_half_spinor(x, face.mu, face.direction, iteration,
                                             expected.data());
                const Real* got = &face.ghost[position * half_spinor_reals];
                for (int r = 0; r < half_spinor_reals; ++r) {
                    // memcmp, not ==: the values are exact, so even the bits must agree.
                    if (std::memcmp(&got[r], &expected[r], sizeof(Real)) != 0) {
                        if (report && errors == 0) {
                            report_error(face, x, r, expected[r], got[r], rank);
                        }
                        ++errors;
                    }
                }
            };
            const auto& extent = lattice.extent();
            for_each_face_site(extent, face.mu, face.layer(extent), check_site);
        }
        return errors;
    }

    /// Bytes this rank sends per exchange (null faces send nothing).
    std::size_t bytes_sent() const {
        std::size_t bytes = 0;
        for (const auto& face : faces_) {
            bytes += face.is_null() ? 0 : face.send.bytes();
        }
        return bytes;
    }

    /// "-x self, +x shm, ..." for the report.
    std::string providers() {
        static const char* const names[] = {"-x", "+x", "-y", "+y", "-z", "+z", "-t", "+t"};
        std::string text;
        for (std::size_t f = 0; f < faces_.size(); ++f) {
            text += std::string(f == 0 ? "" : ", ") + names[f] + " " +
                    std::string(pmr::to_string(faces_[f].connection.provider()));
        }
        return text;
    }

private:
    /// Spin-projects our boundary sites straight into the send window: no staging buffer.
    static void pack(const Lattice<Real>& lattice, Face<Real>& face) {
        Real* out = face.send.data();
        // Sending up, (1 + gamma_mu); sending down, (1 - gamma_mu): see the file comment.
        auto project_site = [&](const Coordinates& x, std::size_t position) {
            project(lattice.spinor(x), face.mu, face.direction, out + position * half_spinor_reals);
        };
        const auto& extent = lattice.extent();
        for_each_face_site(extent, face.mu, face.layer(extent), project_site);
    }

    static void report_error(const Face<Real>& face, const Coordinates& x, int component,
                             Real expected, Real got, int rank) {
        std::fprintf(stderr,
                     "rank %d: wrong half-spinor from direction %+d of dimension %d at local site "
                     "(%d, %d, %d, %d), real %d: expected %.9g, received %.9g\n",
                     rank, face.direction, face.mu, x[0], x[1], x[2], x[3], component,
                     static_cast<double>(expected), static_cast<double>(got));
    }

    std::vector<Face<Real>> faces_;
};

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

std::string join(const std::vector<int>& values, const char* separator) {
    std::string text;
    for (std::size_t i = 0; i < values.size(); ++i) {
        text += (i == 0 ? "" : separator) + std::to_string(values[i]);
    }
    return text;
}

/// Runs the exchange in precision `Real` and returns the exit code.
template <class Real>
int run(const Options& options, const pmr::Communicator& cart) {
    const int rank = cart.rank();
    Lattice<Real> lattice(options.lattice, cart);
    Halo<Real> halo(cart, lattice);

    // Correctness first: a new field in every round, so data left over from an earlier round
    // would be wrong, and every received value checked. These rounds also complete pmr's
    // connection handshakes (made on first use), so the timed loop sees only the steady state.
    long long errors = 0;
    for (int round = 0; round < options.checks; ++round) {
        lattice.fill(round);
        halo.exchange(lattice);
        errors += halo.verify(lattice, round, rank, errors == 0);
    }

    // Speed: exchanges back to back, as a solver alternates them with computation. Filling and
    // checking stay outside, so their imbalance between ranks is not counted as exchange time;
    // the last exchange is checked, with a field no earlier round had.
    lattice.fill(options.checks);
    if (options.checks == 0) {
        halo.exchange(lattice); // still complete the handshakes before timing
    }
    MPI_Barrier(cart);
    const double start = MPI_Wtime();
    for (int iteration = 0; iteration < options.iterations; ++iteration) {
        halo.exchange(lattice);
    }
    double max_elapsed = MPI_Wtime() - start;
    errors += halo.verify(lattice, options.checks, rank, errors == 0);

    MPI_Allreduce(MPI_IN_PLACE, &max_elapsed, 1, MPI_DOUBLE, MPI_MAX, cart);
    auto total_bytes = static_cast<double>(halo.bytes_sent());
    MPI_Allreduce(MPI_IN_PLACE, &total_bytes, 1, MPI_DOUBLE, MPI_SUM, cart);
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_LONG_LONG, MPI_SUM, cart);
    const std::string providers = halo.providers();

    if (rank == 0) {
        std::vector<int> periodic;
        for (int mu = 0; mu < dimensions; ++mu) {
            periodic.push_back(cart.periodic(mu) ? 1 : 0);
        }
        const double per_iteration = max_elapsed / options.iterations;
        const double bytes_per_rank = total_bytes / cart.size();
        std::printf(
            "pmr halo4d: %d rank%s as a %s grid (periodic %s), local lattice %s, %s "
            "precision\n",
            cart.size(), cart.size() == 1 ? "" : "s", join(cart.extents(), " x ").c_str(),
            join(periodic, ",").c_str(),
            join(std::vector<int>(options.lattice.begin(), options.lattice.end()), " x ").c_str(),
            options.single ? "single" : "double");
        std::printf("  providers of rank 0  %s\n", providers.c_str());
        std::printf("  halo per rank        %.1f KiB sent per iteration (half-spinors, %d reals "
                    "per face site)\n",
                    bytes_per_rank / 1024.0, half_spinor_reals);
        std::printf("  time                 %.3f us per iteration (slowest rank, %d iterations, "
                    "project + exchange + unpack)\n",
                    per_iteration * 1e6, options.iterations);
        if (per_iteration > 0.0) {
            std::printf("  bandwidth            %.3f GB/s per rank, %.3f GB/s all ranks\n",
                        bytes_per_rank / per_iteration * 1e-9, total_bytes / per_iteration * 1e-9);
        }
        if (errors == 0) {
            std::printf("  verification         every received half-spinor is correct (%d "
                        "exchanges checked)\n",
                        options.checks + 1);
        } else {
            std::printf("  VERIFICATION FAILED: %lld wrong reals received\n", errors);
        }
    }
    return errors == 0 ? 0 : 1;
}

int run(const Options& options) {
    const pmr::Communicator cart(MPI_COMM_WORLD,
                                 std::vector<int>(options.grid.begin(), options.grid.end()),
                                 {options.periodic[0] != 0, options.periodic[1] != 0,
                                  options.periodic[2] != 0, options.periodic[3] != 0});
    return options.single ? run<float>(options, cart) : run<double>(options, cart);
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
            std::fprintf(stderr, "pmr-halo4d: %s\n\n%s", error.what(), usage);
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
