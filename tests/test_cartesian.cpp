// SPDX-License-Identifier: MIT
// Halo exchange on every Cartesian grid of 1 to 4 dimensions with extents 1, 2 or 3 that fits on
// the ranks, with every combination of periodic dimensions. The first `product` ranks build the
// grid on a split of MPI_COMM_WORLD, open one connection per direction and exchange a few rounds;
// every received element names its sender, the sender's direction, the round and its index, and is
// checked against what the neighbour computed independently here must have sent. Periodic
// dimensions of size 1 (self) and 2 (both directions to the same rank) are where a mix-up of
// directions would show.
#include "support.hpp"

#include <pmr/pmr.hpp>

#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

using namespace pmr_test;

namespace {

struct Shape {
    std::vector<int> dims;
    std::vector<bool> periodic;
    int product = 1;

    std::string describe() const {
        std::ostringstream out;
        for (std::size_t d = 0; d < dims.size(); ++d) {
            out << (d == 0 ? "" : "x") << dims[d] << (periodic[d] ? "p" : "");
        }
        return out.str();
    }
};

/// Every shape, in an order that depends only on `ranks` (the same on every rank).
std::vector<Shape> all_shapes(int ranks) {
    std::vector<Shape> shapes;
    for (int dimensions = 1; dimensions <= 4; ++dimensions) {
        int combinations = 1;
        for (int d = 0; d < dimensions; ++d) {
            combinations *= 3;
        }
        for (int code = 0; code < combinations; ++code) {
            Shape shape;
            for (int d = 0, rest = code; d < dimensions; ++d, rest /= 3) {
                shape.dims.push_back(1 + rest % 3);
                shape.product *= shape.dims.back();
            }
            if (shape.product > ranks) {
                continue;
            }
            for (int mask = 0; mask < (1 << dimensions); ++mask) {
                shape.periodic.clear();
                for (int d = 0; d < dimensions; ++d) {
                    shape.periodic.push_back(((mask >> d) & 1) != 0);
                }
                shapes.push_back(shape);
            }
        }
    }
    return shapes;
}

std::uint64_t fingerprint(const std::vector<Shape>& shapes) {
    std::uint64_t hash = shapes.size();
    for (const Shape& shape : shapes) {
        for (std::size_t d = 0; d < shape.dims.size(); ++d) {
            hash = mix(hash ^ (static_cast<std::uint64_t>(shape.dims[d]) * 2 +
                               (shape.periodic[d] ? 1 : 0)));
        }
        hash = mix(hash ^ 0xffULL);
    }
    return hash;
}

// --- The grid computed here, independently of pmr::Communicator (row-major, no reordering). ----

std::vector<int> coordinates_of(int rank, const std::vector<int>& dims) {
    std::vector<int> coordinates(dims.size());
    for (std::size_t d = dims.size(); d-- > 0;) {
        coordinates[d] = rank % dims[d];
        rank /= dims[d];
    }
    return coordinates;
}

int rank_of(const std::vector<int>& coordinates, const std::vector<int>& dims) {
    int rank = 0;
    for (std::size_t d = 0; d < dims.size(); ++d) {
        rank = rank * dims[d] + coordinates[d];
    }
    return rank;
}

int expected_neighbor(int rank, const Shape& shape, int dimension, int direction) {
    std::vector<int> coordinates = coordinates_of(rank, shape.dims);
    const int extent = shape.dims[dimension];
    int& c = coordinates[dimension];
    c += direction;
    if (c < 0 || c >= extent) {
        if (!shape.periodic[dimension]) {
            return MPI_PROC_NULL;
        }
        c = (c + extent) % extent;
    }
    return rank_of(coordinates, shape.dims);
}

/// Index of a direction: 2 * dimension + (direction > 0), as in the tags.
int direction_index(int dimension, int direction) {
    return 2 * dimension + (direction > 0 ? 1 : 0);
}

// --- Element values that name (sender, direction of the sender, iteration, index). -------------

/// A 16-byte element without padding.
struct Cell {
    std::int32_t sender;
    std::int16_t direction;
    std::int16_t iteration;
    std::uint32_t index;
    std::uint32_t check;
    bool operator==(const Cell& other) const {
        return sender == other.sender && direction == other.direction &&
               iteration == other.iteration && index == other.index && check == other.check;
    }
};
static_assert(sizeof(Cell) == 16);

/// Sender used for the values the receiver leaves in its buffer before a round.
constexpr int sentinel_sender = 4095;

std::uint64_t code_of(int sender, int direction, int iteration, std::size_t index) {
    return (static_cast<std::uint64_t>(sender) << 40U) |
           (static_cast<std::uint64_t>(direction) << 32U) |
           (static_cast<std::uint64_t>(iteration) << 24U) | static_cast<std::uint64_t>(index);
}

template <class T>
T value_of(int sender, int direction, int iteration, std::size_t index);

template <>
double value_of<double>(int sender, int direction, int iteration, std::size_t index) {
    // Exact: the code stays below 2^53.
    return static_cast<double>(code_of(sender, direction, iteration, index)) + 0.5;
}

template <>
std::int32_t value_of<std::int32_t>(int sender, int direction, int iteration, std::size_t index) {
    return static_cast<std::int32_t>(
        static_cast<std::uint32_t>(mix(code_of(sender, direction, iteration, index))));
}

template <>
std::uint8_t value_of<std::uint8_t>(int sender, int direction, int iteration, std::size_t index) {
    return static_cast<std::uint8_t>(mix(code_of(sender, direction, iteration, index)));
}

template <>
Cell value_of<Cell>(int sender, int direction, int iteration, std::size_t index) {
    return Cell{static_cast<std::int32_t>(sender), static_cast<std::int16_t>(direction),
                static_cast<std::int16_t>(iteration), static_cast<std::uint32_t>(index),
                static_cast<std::uint32_t>(mix(code_of(sender, direction, iteration, index)))};
}

std::string show(double value) {
    std::ostringstream out;
    out.precision(17);
    out << value;
    return out.str();
}
std::string show(std::int32_t value) {
    return std::to_string(value);
}
std::string show(std::uint8_t value) {
    return std::to_string(static_cast<unsigned>(value));
}
std::string show(const Cell& cell) {
    return "{sender " + std::to_string(cell.sender) + ", direction " +
           std::to_string(cell.direction) + ", iteration " + std::to_string(cell.iteration) +
           ", index " + std::to_string(cell.index) + "}";
}

const char* type_name(double /*tag*/) {
    return "double";
}
const char* type_name(std::int32_t /*tag*/) {
    return "int32";
}
const char* type_name(std::uint8_t /*tag*/) {
    return "uint8";
}
const char* type_name(const Cell& /*tag*/) {
    return "Cell";
}

/// Checks elements [begin, end) of `data` against value_of(sender, direction, iteration, index);
/// one failure naming `what` and the first differing element if not.
template <class T>
bool check_values(const T* data, std::size_t begin, std::size_t end, int sender, int direction,
                  int iteration, const std::string& what) {
    std::size_t wrong = 0;
    std::size_t first = 0;
    for (std::size_t i = begin; i < end; ++i) {
        if (!(data[i] == value_of<T>(sender, direction, iteration, i))) {
            if (wrong++ == 0) {
                first = i;
            }
        }
    }
    if (wrong != 0) {
        FAIL_CHECK(what << ": " << wrong << " of " << (end - begin) << " elements in [" << begin
                        << ", " << end << ") wrong, first at " << first << ": expected "
                        << show(value_of<T>(sender, direction, iteration, first)) << ", got "
                        << show(data[first]));
        return false;
    }
    return true;
}

// --- One shape.
// -----------------------------------------------------------------------------------

/// Elements `sender` sends in direction `index` on shape number `shape_number` (0 happens).
std::size_t send_count(int shape_number, int sender, int index) {
    return static_cast<std::size_t>(shape_number % 9 + sender % 3) +
           2 * static_cast<std::size_t>(index);
}

/// Room in the receive window of direction `index`: the most any neighbour can send into it (it
/// sends in the opposite direction), plus one element on every other shape.
std::size_t recv_count(int shape_number, int index) {
    const int opposite = index ^ 1;
    return static_cast<std::size_t>(shape_number % 9 + 2 + shape_number % 2) +
           2 * static_cast<std::size_t>(opposite);
}

constexpr int iterations = 3;

/// Runs the exchange of shape `shape_number` on `comm` (the ranks of the grid). Returns whether
/// every check passed.
template <class T>
bool run_shape(const Shape& shape, int shape_number, MPI_Comm comm) {
    const std::string name =
        shape.describe() + " (shape " + std::to_string(shape_number) + ", " + type_name(T{}) + ")";
    bool ok = true;
    auto expect = [&](bool condition, const std::string& what) {
        if (!condition) {
            FAIL_CHECK(name << ": " << what);
            ok = false;
        }
    };

    pmr::Communicator cart(comm, shape.dims, shape.periodic);
    const int me = cart.rank();
    const int dimensions = static_cast<int>(shape.dims.size());
    expect(cart.size() == shape.product, "Communicator::size()");
    expect(cart.dimensions() == dimensions, "Communicator::dimensions()");
    expect(cart.extents() == shape.dims, "Communicator::extents()");
    expect(cart.coordinates() == coordinates_of(me, shape.dims),
           "Communicator::coordinates() of rank " + std::to_string(me));

    std::vector<pmr::Connection> connections;
    std::vector<int> neighbors;
    connections.reserve(2 * static_cast<std::size_t>(dimensions));
    for (int d = 0; d < dimensions; ++d) {
        expect(cart.size(d) == shape.dims[d], "Communicator::size(" + std::to_string(d) + ")");
        expect(cart.periodic(d) == shape.periodic[d],
               "Communicator::periodic(" + std::to_string(d) + ")");
        for (int direction : {-1, +1}) {
            const std::string where = "rank " + std::to_string(me) + ", dimension " +
                                      std::to_string(d) + ", direction " +
                                      std::to_string(direction);
            const int neighbor = expected_neighbor(me, shape, d, direction);
            neighbors.push_back(neighbor);
            expect(cart.neighbor(d, direction) == neighbor,
                   where + ": neighbor() is " + std::to_string(cart.neighbor(d, direction)) +
                       ", expected " + std::to_string(neighbor));
            const pmr::Target target = cart.target(d, direction);
            expect(target.rank() == neighbor, where + ": target().rank()");
            expect(target.send_tag() == direction_index(d, direction), where + ": send tag");
            expect(target.recv_tag() == direction_index(d, -direction), where + ": receive tag");
            connections.emplace_back(target);
        }
    }

    // Window i belongs to direction index i; memory kinds rotate over directions and shapes.
    std::vector<BufferedSend<T>> sends;
    std::vector<BufferedRecv<T>> recvs;
    sends.reserve(connections.size());
    recvs.reserve(connections.size());
    for (std::size_t i = 0; i < connections.size(); ++i) {
        const int index = static_cast<int>(i);
        sends.emplace_back(connections[i],
                           all_memory[(static_cast<std::size_t>(shape_number) + i) % 4],
                           send_count(shape_number, me, index));
        recvs.emplace_back(connections[i],
                           all_memory[(static_cast<std::size_t>(shape_number) + i + 1) % 4],
                           recv_count(shape_number, index));
    }

    for (int iteration = 0; iteration < iterations; ++iteration) {
        for (std::size_t i = 0; i < sends.size(); ++i) {
            auto& send = *sends[i];
            const int index = static_cast<int>(i);
            if ((shape_number + iteration) % 2 == 0) {
                for (std::size_t j = 0; j < send.size(); ++j) {
                    send[j] = value_of<T>(me, index, iteration, j);
                }
            } else {
                std::vector<T> message(send.size());
                for (std::size_t j = 0; j < message.size(); ++j) {
                    message[j] = value_of<T>(me, index, iteration, j);
                }
                send.insert(message.begin(), message.end());
            }
        }
        for (std::size_t i = 0; i < recvs.size(); ++i) {
            auto& recv = *recvs[i];
            for (std::size_t j = 0; j < recv.size(); ++j) {
                recv[j] = value_of<T>(sentinel_sender, static_cast<int>(i), iteration, j);
            }
        }

        exchange(sends, recvs,
                 (shape_number + iteration) % 3 == 0 ? Completion::test : Completion::wait);

        for (std::size_t i = 0; i < recvs.size(); ++i) {
            const auto& recv = *recvs[i];
            const int index = static_cast<int>(i);
            const int neighbor = neighbors[i];
            const std::string what = "rank " + std::to_string(me) + ", direction index " +
                                     std::to_string(index) + ", iteration " +
                                     std::to_string(iteration) + " from neighbour " +
                                     (neighbor == MPI_PROC_NULL ? std::string("MPI_PROC_NULL")
                                                                : std::to_string(neighbor));
            std::size_t count = 0;
            if (neighbor == MPI_PROC_NULL) {
                expect(connections[i].provider() == pmr::Provider::null,
                       what + ": provider of a null connection is " +
                           std::string(pmr::to_string(connections[i].provider())));
            } else {
                // The neighbour in this direction sent in the opposite direction.
                count = send_count(shape_number, neighbor, index ^ 1);
            }
            if (recv.received_bytes() != count * sizeof(T) || recv.received_count() != count) {
                expect(false, what + ": received " + std::to_string(recv.received_bytes()) +
                                  " B, expected " + std::to_string(count * sizeof(T)) + " B");
                continue;
            }
            std::string context = name;
            context.append(", ").append(what);
            if (neighbor != MPI_PROC_NULL) {
                ok = check_values(recv.data(), 0, count, neighbor, index ^ 1, iteration, context) &&
                     ok;
            }
            ok = check_values(recv.data(), count, recv.size(), sentinel_sender, index, iteration,
                              context.append(": elements behind the message")) &&
                 ok;
        }
    }
    return ok;
}

bool run_shape_with_type(const Shape& shape, int shape_number, MPI_Comm comm) {
    switch (shape_number % 4) {
    case 0:
        return run_shape<double>(shape, shape_number, comm);
    case 1:
        return run_shape<std::int32_t>(shape, shape_number, comm);
    case 2:
        return run_shape<Cell>(shape, shape_number, comm);
    default:
        return run_shape<std::uint8_t>(shape, shape_number, comm);
    }
}

} // namespace

TEST_CASE("halo exchange on every small Cartesian grid", "[cartesian]") {
    const int rank = world_rank();
    const int size = world_size();
    const std::vector<Shape> shapes = all_shapes(size);

    // All ranks must walk the same list: compare its fingerprint.
    const auto local = static_cast<unsigned long long>(fingerprint(shapes));
    unsigned long long lowest = 0;
    unsigned long long highest = 0;
    MPI_Allreduce(&local, &lowest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&local, &highest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    REQUIRE(lowest == highest);

    int shapes_run = 0;
    for (std::size_t number = 0; number < shapes.size(); ++number) {
        const Shape& shape = shapes[number];
        MPI_Comm comm = MPI_COMM_NULL;
        MPI_Comm_split(MPI_COMM_WORLD, rank < shape.product ? 0 : MPI_UNDEFINED, rank, &comm);
        bool ok = true;
        if (comm != MPI_COMM_NULL) {
            // Exceptions end this shape on this rank only; the others run into Timeout or PeerLost
            // and every rank meets again at the Allreduce below.
            try {
                ok = run_shape_with_type(shape, static_cast<int>(number), comm);
            } catch (const std::exception& error) {
                FAIL_CHECK(shape.describe() << " (shape " << number << ") on rank " << rank
                                            << ": exception: " << error.what());
                ok = false;
            }
            MPI_Comm_free(&comm);
            ++shapes_run;
        }
        // Stop at the first failing shape, all ranks together: a broken library would otherwise
        // cost a timeout per shape.
        const int failed = ok ? 0 : 1;
        int any_failed = 0;
        MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any_failed != 0) {
            FAIL_CHECK("stopped after shape " << number << " (" << shape.describe()
                                              << ") failed on some rank");
            break;
        }
    }
    if (rank == 0) {
        CHECK(shapes_run == static_cast<int>(shapes.size()));
    }
}
