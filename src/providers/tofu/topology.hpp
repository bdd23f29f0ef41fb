// SPDX-License-Identifier: MIT
// The topology of the Tofu interconnect (K computer, Fugaku) as the emulated tofu provider and
// pmr::tofu::virtual_torus (pmr/tofu.hpp) see it: 6D node coordinates, hop distances, and the
// virtual 3D torus embedded in the 6D shape. Pure arithmetic, no MPI: it belongs to the tofu
// provider, but is compiled into every build (this folder's CMakeLists.txt), because
// pmr::tofu::virtual_torus (src/core/tofu.cpp) is a periodic 3D grid on every provider and checks
// its torus against PMR_TOFU_SHAPE wherever it runs; tests and pmr-bench use it without MPI.
//
// Shape (seed 000; Ajima et al., IEEE Computer 2009): X x Y x Z x a x b c with the Tofu unit
// (a, b, c) = 2 x 3 x 2. X, Y, Z and b are tori (b: a ring of 3), a and c are meshes of 2. A node
// is written "X,Y,Z,a,b,c", a list of nodes separates them by spaces, a shape is "XxYxZ" (the unit
// is implied). Hops are the sum over the six axes of the shortest way along each (routing one axis
// after the other).
//
// The virtual 3D torus: virtual axis 0 combines X with a, axis 1 Y with b, axis 2 Z with c. Along
// one virtual axis of length V = n x m (n positions of the big axis, m of the unit axis) the ring
// runs up the big axis at unit coordinate 0 and comes back down over the other unit coordinates,
// zig-zagging between them:
//   (0,0) (1,0) ... (n-1,0) (n-1,1) [(n-1,2) (n-2,2)] (n-2,1) ... (0,last)  and back to (0,0).
// Every step, the closing one included, is one hop: the big axis need not wrap, and the last unit
// coordinate is next to 0 (a, c: 1 is next to 0; b: 1 and 2 are, b being a ring of 3). A length
// that the unit axis does not divide uses fewer unit coordinates (m = 2 or 1); with m = 1 the ring
// closes in one hop only if it spans the whole big axis (a torus) or has at most 2 nodes.
//
// Faulty nodes (PMR_TOFU_FAULTY): no virtual node is placed on one. Policy, in this order:
//   1. Slide: if the torus is smaller than the shape, it is placed in the first box of the shape
//      (offsets along X, Y, Z and inside the unit) that holds no faulty node: all hops stay 1.
//   2. Shrink (only where asked for, e.g. pmr-bench topology at full-machine scale): drop the
//      virtual plane through each faulty node that is not yet dropped, along the virtual axis where
//      the plane is smallest (fewest healthy nodes left out). The torus loses one position along
//      that axis; its two neighbours across the gap are then up to 2 hops apart. All other virtual
//      links stay 1 hop.
// pmr::tofu::virtual_torus needs its exact extents, so it only slides.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pmr::detail::tofu_topology {

/// The Tofu unit: extents of a, b, c.
constexpr std::array<int, 3> unit = {2, 3, 2};

/// A node: X, Y, Z, a, b, c.
using Node = std::array<int, 6>;

/// The extents X, Y, Z of a machine (the unit 2 x 3 x 2 is implied).
struct Shape {
    std::array<int, 3> xyz = {1, 1, 1};
    /// Extent of axis 0..5 (X, Y, Z, a, b, c).
    int extent(int axis) const noexcept {
        return axis < 3 ? xyz[static_cast<std::size_t>(axis)]
                        : unit[static_cast<std::size_t>(axis - 3)];
    }
    std::size_t nodes() const noexcept;
    bool contains(const Node& node) const noexcept;
    /// A number for each node of the shape, 0 .. nodes() - 1.
    std::size_t index(const Node& node) const noexcept;
    bool operator==(const Shape& other) const noexcept { return xyz == other.xyz; }
    bool operator!=(const Shape& other) const noexcept { return xyz != other.xyz; }
};

/// "24x23x24". @throws ArgumentError naming `what` (e.g. "PMR_TOFU_SHAPE").
Shape parse_shape(const std::string& text, const std::string& what);
/// "3,4,5,0,1,0"; checks the unit coordinates (and, if `shape` is given, X, Y, Z).
/// @throws ArgumentError naming `what`.
Node parse_node(const std::string& text, const Shape* shape, const std::string& what);
/// Nodes separated by spaces. @throws ArgumentError naming `what`.
std::vector<Node> parse_nodes(const std::string& text, const Shape* shape, const std::string& what);

std::string format(const Node& node);
std::string format(const Shape& shape);

/// Links between two nodes of `shape` (0: the same node).
int hops(const Shape& shape, const Node& from, const Node& to) noexcept;

/// The smallest shape with at least `nodes` nodes, extents as equal as possible (1x1x1 holds 12).
Shape smallest_shape(std::size_t nodes);
/// The smallest shape that holds a virtual torus of `dims` with every link at 1 hop.
Shape shape_for(const std::array<int, 3>& dims);

/// A virtual 3D torus placed in a shape.
struct Mapping {
    Shape shape;
    std::array<int, 3> requested{}; ///< the extents asked for
    std::array<int, 3> dims{};      ///< the extents obtained (smaller after a shrink)
    std::array<int, 3> dropped{};   ///< planes dropped along each virtual axis (shrink)
    bool slid = false;              ///< placed away from the origin to avoid faulty nodes
    /// The node of each virtual coordinate, row-major (the last axis fastest, as MPI_Cart_rank).
    std::vector<Node> nodes;
    std::size_t faulty = 0;   ///< distinct faulty nodes inside the shape
    std::size_t left_out = 0; ///< healthy nodes of the shape that hold no virtual node

    /// The node of virtual coordinate `v` (0 <= v[d] < dims[d]).
    const Node& at(const std::array<int, 3>& v) const noexcept;
};

/// Places a virtual torus of `dims` in `shape`, avoiding `faulty` (see the policy above).
/// `shrink`: drop planes if no fault-free placement exists (else throw).
/// @throws ArgumentError if a dimension is not positive, the torus does not fit in the shape, or
/// (without `shrink`) no placement avoids the faulty nodes; the message says which.
Mapping embed(const Shape& shape, const std::array<int, 3>& dims, const std::vector<Node>& faulty,
              bool shrink);

/// Hops between virtual neighbours: every node to its upper neighbour along every axis of
/// extent > 1 (with extent 2 that is also the lower one, counted once per node and axis).
struct HopStatistics {
    std::size_t links = 0;
    double mean = 0.0;
    int max = 0;
    std::array<std::size_t, 4> histogram{}; ///< links at 1, 2, 3 and >= 4 hops
};
HopStatistics neighbour_hops(const Mapping& mapping);

// Placement of this process -----------------------------------------------------------------------

/// Where this process's emulated Tofu node sits.
struct Placement {
    Shape shape;
    Node node{};
    std::string origin; ///< how it was chosen, for messages
};

/// PMR_TOFU_SHAPE if set (validated), else nothing.
bool shape_from_environment(Shape& shape);
/// PMR_TOFU_FAULTY for `shape` (nodes outside it are not part of that machine and are ignored).
/// @throws ArgumentError if malformed.
std::vector<Node> faulty_from_environment(const Shape& shape);

/// Fixes this process's placement to `placement` unless it is fixed already. Returns the
/// placement in force (the earlier one if there was one). Thread-safe.
Placement fix_placement(const Placement& placement);
/// The placement if fixed (false if not).
bool fixed_placement(Placement& placement);
/// The default placement of rank `rank` of `size` ranks: PMR_TOFU_SHAPE (default: the smallest
/// shape whose healthy nodes hold the ranks), ranks in the order of that shape's full virtual
/// torus, skipping faulty nodes. @throws ArgumentError if the shape holds too few healthy nodes.
Placement default_placement(int rank, int size);

} // namespace pmr::detail::tofu_topology
