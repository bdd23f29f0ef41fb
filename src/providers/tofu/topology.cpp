// SPDX-License-Identifier: MIT
#include "providers/tofu/topology.hpp"

#include "base/error.hpp"

#include <pmr/settings.hpp>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

namespace pmr::detail::tofu_topology {
namespace {

const char* const axis_names[6] = {"X", "Y", "Z", "a", "b", "c"};

/// A whole number from `text` (digits only); false if it is none or too large.
bool parse_int(const std::string& text, int& value) {
    if (text.empty() || text.size() > 7 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return false;
    }
    value = std::atoi(text.c_str());
    return true;
}

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::string part;
    std::istringstream stream(text);
    while (std::getline(stream, part, separator)) {
        parts.push_back(part);
    }
    if (!text.empty() && text.back() == separator) {
        parts.emplace_back();
    }
    return parts;
}

/// One virtual axis: a ring through `length` (big, unit) positions relative to the box's corner.
struct Ring {
    int big_extent = 1;  ///< N: extent of the big axis (X, Y or Z) of the shape
    int unit_extent = 1; ///< m: extent of the unit axis (a, b or c)
    int n = 1;           ///< big positions used
    int m = 1;           ///< unit positions used
    std::vector<std::pair<int, int>> positions; ///< (big, unit) relative, in ring order
    std::vector<int> index_of; ///< ring index of relative (big, unit): big * m + unit
};

/// The ring of `length` along big extent N and unit extent m (see the header), or false if the
/// length does not fit.
bool make_ring(int length, int big_extent, int unit_extent, Ring& ring) {
    ring.big_extent = big_extent;
    ring.unit_extent = unit_extent;
    for (int m = std::min(unit_extent, length); m >= 1; --m) {
        if (length % m == 0 && length / m <= big_extent) {
            ring.m = m;
            ring.n = length / m;
            break;
        }
        if (m == 1) {
            return false;
        }
    }
    const int n = ring.n;
    const int m = ring.m;
    ring.positions.clear();
    for (int big = 0; big < n; ++big) {
        ring.positions.emplace_back(big, 0);
    }
    bool upward = true;
    for (int big = n - 1; big >= 0; --big) {
        for (int k = 1; k < m; ++k) {
            ring.positions.emplace_back(big, upward ? k : m - k);
        }
        upward = !upward;
    }
    ring.index_of.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(m), -1);
    for (std::size_t i = 0; i < ring.positions.size(); ++i) {
        const auto& p = ring.positions[i];
        const std::size_t at = static_cast<std::size_t>(p.first) * static_cast<std::size_t>(m) +
                               static_cast<std::size_t>(p.second);
        ring.index_of[at] = static_cast<int>(i);
    }
    return true;
}

/// Offsets (big, unit) at which a ring may be placed: the box slides along the big torus and, if
/// it does not use the whole unit axis, inside it (b is a ring of 3: {2, 0} are neighbours; a and
/// c are meshes of 2, where a single position may be 0 or 1).
std::vector<std::pair<int, int>> offsets(const Ring& ring) {
    std::vector<std::pair<int, int>> result;
    const int bigs = ring.n == ring.big_extent ? 1 : ring.big_extent;
    const int units = ring.m == ring.unit_extent ? 1 : (ring.unit_extent == 3 ? 3 : 2);
    for (int b = 0; b < bigs; ++b) {
        for (int u = 0; u < units; ++u) {
            result.emplace_back(b, u);
        }
    }
    return result;
}

/// Ring index of a node's (big, unit) coordinates on `ring` placed at `offset`, or -1 outside.
int ring_index(const Ring& ring, std::pair<int, int> offset, int big, int unit) {
    const int rb = ((big - offset.first) % ring.big_extent + ring.big_extent) % ring.big_extent;
    const int ru =
        ((unit - offset.second) % ring.unit_extent + ring.unit_extent) % ring.unit_extent;
    if (rb >= ring.n || ru >= ring.m) {
        return -1;
    }
    return ring.index_of[static_cast<std::size_t>(rb) * static_cast<std::size_t>(ring.m) +
                         static_cast<std::size_t>(ru)];
}

std::string dims_text(const std::array<int, 3>& dims) {
    return std::to_string(dims[0]) + " x " + std::to_string(dims[1]) + " x " +
           std::to_string(dims[2]);
}

std::mutex placement_mutex;
std::optional<Placement> placement_fixed; // guarded by placement_mutex

} // namespace

std::size_t Shape::nodes() const noexcept {
    std::size_t n = 1;
    for (int axis = 0; axis < 6; ++axis) {
        n *= static_cast<std::size_t>(extent(axis));
    }
    return n;
}

bool Shape::contains(const Node& node) const noexcept {
    for (int axis = 0; axis < 6; ++axis) {
        const int v = node[static_cast<std::size_t>(axis)];
        if (v < 0 || v >= extent(axis)) {
            return false;
        }
    }
    return true;
}

std::size_t Shape::index(const Node& node) const noexcept {
    std::size_t i = 0;
    for (int axis = 0; axis < 6; ++axis) {
        i = i * static_cast<std::size_t>(extent(axis)) +
            static_cast<std::size_t>(node[static_cast<std::size_t>(axis)]);
    }
    return i;
}

Shape parse_shape(const std::string& text, const std::string& what) {
    const auto parts = split(text, 'x');
    Shape shape;
    bool ok = parts.size() == 3;
    for (std::size_t i = 0; ok && i < 3; ++i) {
        ok = parse_int(parts[i], shape.xyz[i]) && shape.xyz[i] >= 1;
    }
    if (!ok) {
        raise<ArgumentError>(what + " '" + text + "' is not a shape XxYxZ of positive extents",
                             "tofu topology",
                             "Give e.g. 24x18x16 (K computer) or 24x23x24 (Fugaku); the Tofu "
                             "unit 2x3x2 is implied.");
    }
    return shape;
}

Node parse_node(const std::string& text, const Shape* shape, const std::string& what) {
    const auto parts = split(text, ',');
    Node node{};
    bool ok = parts.size() == 6;
    for (std::size_t i = 0; ok && i < 6; ++i) {
        ok = parse_int(parts[i], node[i]);
    }
    if (!ok) {
        raise<ArgumentError>(what + ": '" + text + "' is not a node X,Y,Z,a,b,c", "tofu topology",
                             "Write a node as six numbers, e.g. 3,4,5,0,1,0.");
    }
    for (int axis = 0; axis < 6; ++axis) {
        const int limit = axis >= 3          ? unit[static_cast<std::size_t>(axis - 3)]
                          : shape != nullptr ? shape->xyz[static_cast<std::size_t>(axis)]
                                             : std::numeric_limits<int>::max();
        if (node[static_cast<std::size_t>(axis)] >= limit) {
            std::string message = what;
            message += ": node " + text + " has " + axis_names[axis] + " = ";
            message += std::to_string(node[static_cast<std::size_t>(axis)]);
            message += ", outside 0.." + std::to_string(limit - 1);
            raise<ArgumentError>(message, "tofu topology",
                                 axis >= 3 ? "The Tofu unit (a, b, c) is 2 x 3 x 2."
                                           : "Give nodes inside the shape.");
        }
    }
    return node;
}

std::vector<Node> parse_nodes(const std::string& text, const Shape* shape,
                              const std::string& what) {
    std::vector<Node> nodes;
    std::istringstream stream(text);
    std::string word;
    while (stream >> word) {
        nodes.push_back(parse_node(word, shape, what));
    }
    return nodes;
}

std::string format(const Node& node) {
    std::string s;
    for (std::size_t i = 0; i < 6; ++i) {
        s += (i == 0 ? "" : ",") + std::to_string(node[i]);
    }
    return s;
}

std::string format(const Shape& shape) {
    return std::to_string(shape.xyz[0]) + "x" + std::to_string(shape.xyz[1]) + "x" +
           std::to_string(shape.xyz[2]);
}

int hops(const Shape& shape, const Node& from, const Node& to) noexcept {
    int total = 0;
    for (int axis = 0; axis < 6; ++axis) {
        const int extent = shape.extent(axis);
        const int d =
            std::abs(from[static_cast<std::size_t>(axis)] - to[static_cast<std::size_t>(axis)]);
        // a and c are meshes, every other axis a torus.
        const bool torus = axis != 3 && axis != 5;
        total += torus ? std::min(d, extent - d) : d;
    }
    return total;
}

Shape smallest_shape(std::size_t nodes) {
    const std::size_t per_unit = 12;
    const std::size_t units = std::max<std::size_t>(1, (nodes + per_unit - 1) / per_unit);
    Shape best;
    std::size_t best_product = std::numeric_limits<std::size_t>::max();
    std::size_t best_max = best_product;
    for (std::size_t x = 1; x <= units; ++x) {
        for (std::size_t y = 1; x * y <= units * 2 && y <= units; ++y) {
            const std::size_t z = std::max<std::size_t>(1, (units + x * y - 1) / (x * y));
            const std::size_t product = x * y * z;
            const std::size_t largest = std::max({x, y, z});
            if (product < best_product || (product == best_product && largest < best_max)) {
                best_product = product;
                best_max = largest;
                best.xyz = {static_cast<int>(x), static_cast<int>(y), static_cast<int>(z)};
            }
        }
    }
    return best;
}

Shape shape_for(const std::array<int, 3>& dims) {
    Shape shape;
    for (std::size_t d = 0; d < 3; ++d) {
        if (dims[d] < 1) {
            raise<ArgumentError>("virtual torus " + dims_text(dims) + " has an extent below 1",
                                 "tofu topology");
        }
        int m = std::min(unit[d], dims[d]);
        while (dims[d] % m != 0) {
            --m;
        }
        shape.xyz[d] = dims[d] / m;
    }
    return shape;
}

const Node& Mapping::at(const std::array<int, 3>& v) const noexcept {
    const auto i = (static_cast<std::size_t>(v[0]) * static_cast<std::size_t>(dims[1]) +
                    static_cast<std::size_t>(v[1])) *
                       static_cast<std::size_t>(dims[2]) +
                   static_cast<std::size_t>(v[2]);
    return nodes[i];
}

Mapping embed(const Shape& shape, const std::array<int, 3>& dims, const std::vector<Node>& faulty,
              bool shrink) {
    const std::string where = "tofu virtual torus";
    Mapping mapping;
    mapping.shape = shape;
    mapping.requested = dims;
    std::array<Ring, 3> rings;
    for (std::size_t d = 0; d < 3; ++d) {
        if (dims[d] < 1) {
            raise<ArgumentError>("virtual torus " + dims_text(dims) + " has an extent below 1",
                                 where);
        }
        if (!make_ring(dims[d], shape.xyz[d], unit[d], rings[d])) {
            raise<ArgumentError>(
                "virtual torus " + dims_text(dims) + " does not fit in shape " + format(shape) +
                    "x2x3x2: virtual axis " + std::to_string(d) + " of " + std::to_string(dims[d]) +
                    " needs " + axis_names[d] + " x " + axis_names[d + 3] + " (at most " +
                    std::to_string(shape.xyz[d]) + " x " + std::to_string(unit[d]) +
                    ", the extent a multiple of the unit positions)",
                where, "Give a larger PMR_TOFU_SHAPE or a smaller torus.");
        }
    }
    // Distinct faulty nodes inside the shape.
    std::set<std::size_t> seen;
    std::vector<Node> faults;
    for (const Node& f : faulty) {
        if (shape.contains(f) && seen.insert(shape.index(f)).second) {
            faults.push_back(f);
        }
    }
    mapping.faulty = faults.size();

    // 1. Slide: the first placement whose box holds no faulty node.
    std::array<std::pair<int, int>, 3> offset{};
    bool clean = faults.empty();
    if (!clean) {
        const auto o0 = offsets(rings[0]);
        const auto o1 = offsets(rings[1]);
        const auto o2 = offsets(rings[2]);
        auto inside = [&](std::size_t d, std::pair<int, int> o, const Node& f) {
            return ring_index(rings[d], o, f[d], f[d + 3]) >= 0;
        };
        for (std::size_t i = 0; i < o0.size() && !clean; ++i) {
            for (std::size_t j = 0; j < o1.size() && !clean; ++j) {
                for (std::size_t k = 0; k < o2.size() && !clean; ++k) {
                    const bool hit = std::any_of(faults.begin(), faults.end(), [&](const Node& f) {
                        return inside(0, o0[i], f) && inside(1, o1[j], f) && inside(2, o2[k], f);
                    });
                    if (!hit) {
                        clean = true;
                        offset = {o0[i], o1[j], o2[k]};
                    }
                }
            }
        }
        mapping.slid = clean;
    }

    // 2. Shrink: drop a virtual plane through every faulty node not yet avoided.
    std::array<std::vector<bool>, 3> dropped;
    std::array<int, 3> kept = dims;
    for (std::size_t d = 0; d < 3; ++d) {
        dropped[d].assign(static_cast<std::size_t>(dims[d]), false);
    }
    if (!clean) {
        if (!shrink) {
            raise<ArgumentError>("no placement of virtual torus " + dims_text(dims) + " in shape " +
                                     format(shape) + "x2x3x2 avoids the " +
                                     std::to_string(faults.size()) +
                                     " faulty node(s) of PMR_TOFU_FAULTY",
                                 where,
                                 "Give a larger PMR_TOFU_SHAPE (room to slide the torus past the "
                                 "faulty nodes) or a smaller torus.");
        }
        offset = {};
        for (const Node& f : faults) {
            std::array<int, 3> position{};
            bool covered = false;
            for (std::size_t d = 0; d < 3; ++d) {
                position[d] = ring_index(rings[d], offset[d], f[d], f[d + 3]);
                covered =
                    covered || position[d] < 0 || dropped[d][static_cast<std::size_t>(position[d])];
            }
            if (covered) {
                continue;
            }
            std::size_t best = 3;
            std::size_t best_loss = std::numeric_limits<std::size_t>::max();
            for (std::size_t d = 0; d < 3; ++d) {
                if (kept[d] <= 1) {
                    continue;
                }
                std::size_t loss = 1;
                for (std::size_t e = 0; e < 3; ++e) {
                    loss *= e == d ? 1 : static_cast<std::size_t>(kept[e]);
                }
                if (loss < best_loss) {
                    best_loss = loss;
                    best = d;
                }
            }
            if (best == 3) {
                raise<ArgumentError>("the faulty nodes leave no virtual torus in shape " +
                                         format(shape) + "x2x3x2",
                                     where, "Give fewer faulty nodes or a larger shape.");
            }
            dropped[best][static_cast<std::size_t>(position[best])] = true;
            --kept[best];
            ++mapping.dropped[best];
        }
    }
    mapping.dims = kept;

    // The kept positions of each ring, as absolute (big, unit) coordinates.
    std::array<std::vector<std::pair<int, int>>, 3> axis;
    for (std::size_t d = 0; d < 3; ++d) {
        const Ring& ring = rings[d];
        for (std::size_t i = 0; i < ring.positions.size(); ++i) {
            if (dropped[d][i]) {
                continue;
            }
            const auto& p = ring.positions[i];
            axis[d].emplace_back((p.first + offset[d].first) % ring.big_extent,
                                 (p.second + offset[d].second) % ring.unit_extent);
        }
    }
    mapping.nodes.reserve(static_cast<std::size_t>(kept[0]) * static_cast<std::size_t>(kept[1]) *
                          static_cast<std::size_t>(kept[2]));
    for (const auto& p0 : axis[0]) {
        for (const auto& p1 : axis[1]) {
            for (const auto& p2 : axis[2]) {
                mapping.nodes.push_back(
                    {p0.first, p1.first, p2.first, p0.second, p1.second, p2.second});
            }
        }
    }
    mapping.left_out = shape.nodes() - faults.size() - mapping.nodes.size();
    return mapping;
}

HopStatistics neighbour_hops(const Mapping& mapping) {
    HopStatistics stats;
    double sum = 0.0;
    const auto& dims = mapping.dims;
    std::array<int, 3> v{};
    for (v[0] = 0; v[0] < dims[0]; ++v[0]) {
        for (v[1] = 0; v[1] < dims[1]; ++v[1]) {
            for (v[2] = 0; v[2] < dims[2]; ++v[2]) {
                const Node& here = mapping.at(v);
                for (std::size_t d = 0; d < 3; ++d) {
                    if (dims[d] < 2) {
                        continue;
                    }
                    auto w = v;
                    w[d] = (w[d] + 1) % dims[d];
                    const int h = hops(mapping.shape, here, mapping.at(w));
                    ++stats.links;
                    sum += h;
                    stats.max = std::max(stats.max, h);
                    ++stats.histogram[static_cast<std::size_t>(std::clamp(h, 1, 4) - 1)];
                }
            }
        }
    }
    stats.mean = stats.links > 0 ? sum / static_cast<double>(stats.links) : 0.0;
    return stats;
}

bool shape_from_environment(Shape& shape) {
    const auto text = settings::text("PMR_TOFU_SHAPE");
    if (!text) {
        return false;
    }
    shape = parse_shape(*text, "environment variable PMR_TOFU_SHAPE");
    return true;
}

std::vector<Node> faulty_from_environment(const Shape& shape) {
    const auto text = settings::text("PMR_TOFU_FAULTY");
    if (!text) {
        return {};
    }
    auto nodes = parse_nodes(*text, nullptr, "environment variable PMR_TOFU_FAULTY");
    nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                               [&](const Node& n) { return !shape.contains(n); }),
                nodes.end());
    return nodes;
}

Placement fix_placement(const Placement& placement) {
    std::lock_guard<std::mutex> lock(placement_mutex);
    if (!placement_fixed) {
        placement_fixed = placement;
    }
    return *placement_fixed;
}

bool fixed_placement(Placement& placement) {
    std::lock_guard<std::mutex> lock(placement_mutex);
    if (placement_fixed) {
        placement = *placement_fixed;
    }
    return placement_fixed.has_value();
}

Placement default_placement(int rank, int size) {
    Placement placement;
    std::vector<Node> faults;
    const bool given = shape_from_environment(placement.shape);
    std::size_t want = static_cast<std::size_t>(std::max(size, 1));
    for (;;) {
        if (!given) {
            placement.shape = smallest_shape(want);
        }
        faults = faulty_from_environment(placement.shape);
        std::set<std::size_t> distinct;
        for (const Node& f : faults) {
            distinct.insert(placement.shape.index(f));
        }
        const std::size_t healthy = placement.shape.nodes() - distinct.size();
        if (healthy >= static_cast<std::size_t>(size)) {
            break;
        }
        if (given) {
            raise<ArgumentError>("PMR_TOFU_SHAPE " + format(placement.shape) + " holds " +
                                     std::to_string(healthy) + " healthy nodes, not the " +
                                     std::to_string(size) + " ranks",
                                 "tofu topology", "Give a larger PMR_TOFU_SHAPE.");
        }
        want = placement.shape.nodes() + 1;
    }
    const Shape& s = placement.shape;
    const Mapping full = embed(s, {2 * s.xyz[0], 3 * s.xyz[1], 2 * s.xyz[2]}, {}, false);
    std::set<std::size_t> broken;
    for (const Node& f : faults) {
        broken.insert(s.index(f));
    }
    int seen = 0;
    for (const Node& node : full.nodes) {
        if (broken.count(s.index(node)) != 0) {
            continue;
        }
        if (seen++ == rank) {
            placement.node = node;
            break;
        }
    }
    placement.origin = "rank " + std::to_string(rank) + " of " + std::to_string(size) +
                       " in the order of the virtual torus of shape " + format(s);
    return placement;
}

} // namespace pmr::detail::tofu_topology
