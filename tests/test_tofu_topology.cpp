// SPDX-License-Identifier: MIT
// The Tofu topology (src/providers/tofu/topology.hpp): 6D coordinates, hops (checked against a
// breadth-first search over the links), the virtual 3D torus embedding (bijective onto healthy
// nodes, neighbours at 1 hop, faulty nodes avoided), and, over several ranks,
// pmr::tofu::virtual_torus on the tofu provider, whose hops feed the timing model.
#include "support.hpp"

#include "providers/tofu/emulated/model.hpp"
#include "providers/tofu/process.hpp"
#include "providers/tofu/topology.hpp"

#include <catch2/catch.hpp>

#include <pmr/pmr.hpp>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace topo = pmr::detail::tofu_topology;

namespace {

/// All nodes of `shape` in Shape::index order.
std::vector<topo::Node> all_nodes(const topo::Shape& shape) {
    std::vector<topo::Node> nodes;
    topo::Node n{};
    for (n[0] = 0; n[0] < shape.extent(0); ++n[0]) {
        for (n[1] = 0; n[1] < shape.extent(1); ++n[1]) {
            for (n[2] = 0; n[2] < shape.extent(2); ++n[2]) {
                for (n[3] = 0; n[3] < 2; ++n[3]) {
                    for (n[4] = 0; n[4] < 3; ++n[4]) {
                        for (n[5] = 0; n[5] < 2; ++n[5]) {
                            nodes.push_back(n);
                        }
                    }
                }
            }
        }
    }
    return nodes;
}

/// Distances from `from` by breadth-first search over the links of the 6D mesh/torus: X, Y, Z and
/// b wrap around, a and c do not (written independently of tofu_topology::hops).
std::vector<int> bfs(const topo::Shape& shape, const topo::Node& from) {
    std::vector<int> distance(shape.nodes(), -1);
    std::deque<topo::Node> queue{from};
    distance[shape.index(from)] = 0;
    while (!queue.empty()) {
        const topo::Node here = queue.front();
        queue.pop_front();
        for (std::size_t axis = 0; axis < 6; ++axis) {
            const int extent = shape.extent(static_cast<int>(axis));
            const bool wraps = axis != 3 && axis != 5;
            for (int step : {-1, 1}) {
                topo::Node next = here;
                next[axis] += step;
                if (next[axis] < 0 || next[axis] >= extent) {
                    if (!wraps) {
                        continue;
                    }
                    next[axis] = (next[axis] + extent) % extent;
                }
                if (distance[shape.index(next)] < 0) {
                    distance[shape.index(next)] = distance[shape.index(here)] + 1;
                    queue.push_back(next);
                }
            }
        }
    }
    return distance;
}

/// Checks that `m` is a bijection of its virtual coordinates onto distinct healthy nodes of its
/// shape, that no node is faulty, and that the counts add up.
void check_bijective(const topo::Mapping& m, const std::vector<topo::Node>& faulty) {
    const std::size_t expected = static_cast<std::size_t>(m.dims[0]) *
                                 static_cast<std::size_t>(m.dims[1]) *
                                 static_cast<std::size_t>(m.dims[2]);
    REQUIRE(m.nodes.size() == expected);
    std::set<std::size_t> broken;
    for (const auto& f : faulty) {
        if (m.shape.contains(f)) {
            broken.insert(m.shape.index(f));
        }
    }
    std::vector<bool> used(m.shape.nodes(), false);
    std::size_t bad = 0;
    for (const auto& n : m.nodes) {
        if (!m.shape.contains(n) || used[m.shape.index(n)] || broken.count(m.shape.index(n)) != 0) {
            ++bad;
            continue;
        }
        used[m.shape.index(n)] = true;
    }
    CHECK(bad == 0);
    CHECK(m.faulty == broken.size());
    CHECK(m.left_out == m.shape.nodes() - broken.size() - m.nodes.size());
}

} // namespace

TEST_CASE("shapes and nodes are read and written as XxYxZ and X,Y,Z,a,b,c", "[topology]") {
    const topo::Shape shape = topo::parse_shape("24x23x24", "test");
    CHECK(shape.xyz == std::array<int, 3>{24, 23, 24});
    CHECK(shape.nodes() == 158976u);                                // Fugaku
    CHECK(topo::parse_shape("24x18x16", "test").nodes() == 82944u); // K computer
    CHECK(topo::format(shape) == "24x23x24");
    const topo::Node n = topo::parse_node("3,4,5,0,1,0", &shape, "test");
    CHECK(n == topo::Node{3, 4, 5, 0, 1, 0});
    CHECK(topo::format(n) == "3,4,5,0,1,0");
    const auto list = topo::parse_nodes("3,4,5,0,1,0  10,4,10,1,2,1", &shape, "test");
    REQUIRE(list.size() == 2);
    CHECK(list[1] == topo::Node{10, 4, 10, 1, 2, 1});
    for (const char* bad : {"24x23", "24x0x24", "ax2x3", "24x23x24x2", ""}) {
        INFO(bad);
        CHECK_THROWS_AS(topo::parse_shape(bad, "test"), pmr::ArgumentError);
    }
    // a and c have 2 positions, b has 3, X of the shape 24.
    for (const char* bad : {"3,4,5,2,1,0", "3,4,5,0,3,0", "3,4,5,0,1,2", "24,4,5,0,1,0",
                            "3,4,5,0,1", "3,4,-5,0,1,0", "3;4;5;0;1;0"}) {
        INFO(bad);
        CHECK_THROWS_AS(topo::parse_node(bad, &shape, "test"), pmr::ArgumentError);
    }
    CHECK(pmr_test::message_of<pmr::ArgumentError>([&] {
              topo::parse_node("3,4,5,0,3,0", &shape, "PMR_TOFU_FAULTY");
          }).find("b = 3") != std::string::npos);
}

TEST_CASE("hops follow the 6D mesh/torus", "[topology]") {
    const topo::Shape shape = topo::parse_shape("5x2x3", "test");
    CHECK(topo::hops(shape, {0, 0, 0, 0, 0, 0}, {4, 0, 0, 0, 0, 0}) == 1); // X wraps
    CHECK(topo::hops(shape, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 2, 0}) == 1); // b wraps (ring of 3)
    CHECK(topo::hops(shape, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 0, 1}) == 2); // a, c: meshes
    CHECK(topo::hops(shape, {0, 0, 0, 0, 0, 0}, {2, 1, 1, 1, 1, 1}) == 7);
    // Against a breadth-first search over the links, from every node of a shape with all kinds
    // of extents (1, 2, 3, 5).
    const auto nodes = all_nodes(shape);
    std::size_t mismatches = 0;
    for (const auto& from : nodes) {
        const auto distance = bfs(shape, from);
        for (const auto& to : nodes) {
            mismatches += topo::hops(shape, from, to) != distance[shape.index(to)] ? 1 : 0;
        }
    }
    CHECK(mismatches == 0);
    const topo::Shape one = topo::parse_shape("1x1x1", "test");
    for (const auto& from : all_nodes(one)) {
        const auto distance = bfs(one, from);
        for (const auto& to : all_nodes(one)) {
            CHECK(topo::hops(one, from, to) == distance[one.index(to)]);
        }
    }
}

TEST_CASE("the default shape is the smallest that holds the ranks", "[topology]") {
    CHECK(topo::smallest_shape(1).xyz == std::array<int, 3>{1, 1, 1});
    CHECK(topo::smallest_shape(12).xyz == std::array<int, 3>{1, 1, 1});
    CHECK(topo::smallest_shape(13).nodes() == 24u);
    CHECK(topo::smallest_shape(96).nodes() == 96u); // 2x2x2
    CHECK(topo::smallest_shape(96).xyz == std::array<int, 3>{2, 2, 2});
    CHECK(topo::smallest_shape(100).nodes() >= 100u);
    CHECK(topo::shape_for({48, 69, 48}).xyz == std::array<int, 3>{24, 23, 24});
    CHECK(topo::shape_for({4, 1, 1}).xyz == std::array<int, 3>{2, 1, 1});
    CHECK(topo::shape_for({5, 4, 3}).xyz == std::array<int, 3>{5, 2, 3}); // 3 along Z x c: Z = 3
}

TEST_CASE("the virtual torus is a bijection with every neighbour at 1 hop", "[topology]") {
    SECTION("full machines: K computer and Fugaku") {
        for (const char* text : {"24x18x16", "24x23x24"}) {
            INFO(text);
            const topo::Shape shape = topo::parse_shape(text, "test");
            const std::array<int, 3> dims = {2 * shape.xyz[0], 3 * shape.xyz[1], 2 * shape.xyz[2]};
            const auto m = topo::embed(shape, dims, {}, false);
            CHECK(m.dims == dims);
            check_bijective(m, {});
            CHECK(m.left_out == 0);
            const auto stats = topo::neighbour_hops(m);
            CHECK(stats.max == 1);
            CHECK(stats.mean == 1.0);
            CHECK(stats.links == 3 * shape.nodes());
        }
    }
    SECTION("every torus of shape_for, and the whole of small shapes") {
        std::size_t tori = 0;
        for (int d0 = 1; d0 <= 9; ++d0) {
            for (int d1 = 1; d1 <= 9; ++d1) {
                for (int d2 = 1; d2 <= 6; ++d2) {
                    const std::array<int, 3> dims = {d0, d1, d2};
                    INFO(d0 << " x " << d1 << " x " << d2);
                    const auto m = topo::embed(topo::shape_for(dims), dims, {}, false);
                    check_bijective(m, {});
                    const auto stats = topo::neighbour_hops(m);
                    CHECK(stats.max <= 1);
                    ++tori;
                }
            }
        }
        CHECK(tori == 486);
    }
    SECTION("a torus too large for the shape is refused") {
        const topo::Shape shape = topo::parse_shape("2x1x1", "test");
        CHECK_THROWS_AS(topo::embed(shape, {6, 3, 2}, {}, false), pmr::ArgumentError);
        CHECK_THROWS_AS(topo::embed(shape, {4, 4, 1}, {}, false), pmr::ArgumentError);
        CHECK_THROWS_AS(topo::embed(shape, {0, 1, 1}, {}, false), pmr::ArgumentError);
    }
}

TEST_CASE("the virtual torus avoids faulty nodes", "[topology]") {
    SECTION("it slides past them where the shape has room, every hop still 1") {
        const topo::Shape shape = topo::parse_shape("2x1x1", "test");
        const std::vector<topo::Node> faulty = {{0, 0, 0, 0, 0, 0}};
        const auto m = topo::embed(shape, {4, 1, 1}, faulty, false);
        CHECK(m.slid);
        check_bijective(m, faulty);
        CHECK(topo::neighbour_hops(m).max == 1);
    }
    SECTION("random faults in a larger shape") {
        std::mt19937 random(12);
        const topo::Shape shape = topo::parse_shape("6x4x5", "test");
        for (int trial = 0; trial < 50; ++trial) {
            std::vector<topo::Node> faulty;
            faulty.reserve(static_cast<std::size_t>(1 + trial % 4));
            for (int k = 0; k < 1 + trial % 4; ++k) {
                faulty.push_back({int(random() % 6), int(random() % 4), int(random() % 5),
                                  int(random() % 2), int(random() % 3), int(random() % 2)});
            }
            const std::array<int, 3> dims = {8, 6, 8};
            const auto m = topo::embed(shape, dims, faulty, false);
            INFO("trial " << trial);
            CHECK(m.dims == dims);
            check_bijective(m, faulty);
            CHECK(topo::neighbour_hops(m).max == 1);
        }
    }
    SECTION("at full scale it shrinks by planes, at a cost in hops") {
        const topo::Shape shape = topo::parse_shape("24x23x24", "test");
        const std::array<int, 3> dims = {48, 69, 48};
        const std::vector<topo::Node> faulty = {{3, 4, 5, 0, 1, 0}, {10, 8, 10, 1, 2, 1}};
        CHECK_THROWS_AS(topo::embed(shape, dims, faulty, false), pmr::ArgumentError);
        const auto m = topo::embed(shape, dims, faulty, true);
        check_bijective(m, faulty);
        // Each fault costs one plane along the longest virtual axis (69): the fewest nodes.
        CHECK(m.dims == std::array<int, 3>{48, 67, 48});
        CHECK(m.left_out == 2 * 48 * 48 - 2);
        const auto stats = topo::neighbour_hops(m);
        CHECK(stats.max == 2);
        CHECK(stats.histogram[1] == std::size_t{2} * 48 * 48); // the links across the two gaps
        CHECK(stats.histogram[0] == stats.links - std::size_t{2} * 48 * 48);
        // Two faults whose planes are next to each other on the ring (Y = 4, b = 1 and 2): one
        // gap of two planes, its links 3 hops long.
        const std::vector<topo::Node> twins = {{3, 4, 5, 0, 1, 0}, {10, 4, 10, 1, 2, 1}};
        const auto t = topo::embed(shape, dims, twins, true);
        check_bijective(t, twins);
        CHECK(t.dims == std::array<int, 3>{48, 67, 48});
        CHECK(topo::neighbour_hops(t).max == 3);
        CHECK(topo::neighbour_hops(t).histogram[2] == std::size_t{48} * 48);
    }
}

TEST_CASE("ranks are placed in virtual-torus order, skipping faulty nodes", "[topology]") {
    ::unsetenv("PMR_TOFU_SHAPE");
    ::unsetenv("PMR_TOFU_FAULTY");
    // 13 ranks need two Tofu units; rank r sits at the r-th node of that shape's virtual torus.
    const topo::Shape shape = topo::smallest_shape(13);
    const auto order =
        topo::embed(shape, {2 * shape.xyz[0], 3 * shape.xyz[1], 2 * shape.xyz[2]}, {}, false);
    for (int r = 0; r < 13; ++r) {
        const auto p = topo::default_placement(r, 13);
        CHECK(p.shape == shape);
        CHECK(p.node == order.nodes[static_cast<std::size_t>(r)]);
    }
    // The nodes of ranks 0 and 2 broken: everyone moves up, past them.
    const std::string broken =
        topo::format(order.nodes[0]) + " " + topo::format(order.nodes[2]) + " 99,0,0,0,0,0";
    ::setenv("PMR_TOFU_SHAPE", topo::format(shape).c_str(), 1);
    ::setenv("PMR_TOFU_FAULTY", broken.c_str(), 1);
    CHECK(topo::default_placement(0, 13).node == order.nodes[1]);
    CHECK(topo::default_placement(1, 13).node == order.nodes[3]);
    CHECK(topo::default_placement(12, 13).node == order.nodes[14]);
    // 22 healthy nodes do not hold 23 ranks in the given shape.
    CHECK_THROWS_AS(topo::default_placement(0, 23), pmr::ArgumentError);
    CHECK(topo::default_placement(21, 22).node == order.nodes[23]);
    ::setenv("PMR_TOFU_FAULTY", "1,2", 1);
    CHECK_THROWS_AS(topo::faulty_from_environment(shape), pmr::ArgumentError);
    ::unsetenv("PMR_TOFU_SHAPE");
    ::unsetenv("PMR_TOFU_FAULTY");
}

TEST_CASE("hops feed the timing model's latency", "[topology]") {
    pmr::detail::tofu::ModelParameters p = pmr::detail::tofu::model_preset("k");
    p.time_scale = 1.0;
    const pmr::detail::tofu::TimingModel model(p);
    const topo::Shape shape = topo::parse_shape("24x18x16", "test");
    const topo::Node a = {0, 0, 0, 0, 0, 0};
    const topo::Node b = {12, 9, 8, 1, 1, 1}; // the farthest: 12 + 9 + 8 + 3
    const int far = topo::hops(shape, a, b);
    CHECK(far == 32);
    const double near = model.lone_put_seconds(8, topo::hops(shape, a, {1, 0, 0, 0, 0, 0}));
    CHECK(model.lone_put_seconds(8, far) - near == Approx(31 * p.hop_latency));
}

// Registered on 2 and 4 ranks with PMR_TOFU_SHAPE=2x1x1, the K model and 50 ms per extra hop
// (tests/CMakeLists.txt), once also with a faulty node.
TEST_CASE("a virtual-torus communicator puts virtual neighbours 1 hop apart", "[virtual]") {
    const int size = pmr_test::world_size();
    if (size != 2 && size != 4) {
        return;
    }
    auto grid = pmr::tofu::virtual_torus(MPI_COMM_WORLD, {size, 1, 1});
    CHECK(grid.rank() == pmr_test::world_rank()); // the rank order of a plain Cartesian grid
    topo::Placement me;
    REQUIRE(topo::fixed_placement(me));
    CHECK(topo::format(me.shape) == "2x1x1");
    std::vector<int> all(static_cast<std::size_t>(6 * size));
    MPI_Allgather(me.node.data(), 6, MPI_INT, all.data(), 6, MPI_INT, grid.get());
    auto node_of = [&](int rank) {
        topo::Node n{};
        std::copy_n(all.begin() + 6L * rank, 6, n.begin());
        return n;
    };
    std::set<std::size_t> distinct;
    const auto faulty = topo::faulty_from_environment(me.shape);
    for (int r = 0; r < size; ++r) {
        distinct.insert(me.shape.index(node_of(r)));
        for (const auto& f : faulty) {
            CHECK(node_of(r) != f);
        }
    }
    CHECK(distinct.size() == static_cast<std::size_t>(size));
    for (int direction : {-1, 1}) {
        CHECK(topo::hops(me.shape, me.node, node_of(grid.neighbor(0, direction))) == 1);
    }
    if (size != 4) {
        return;
    }
    // Over the tofu provider, rank 0 and its virtual neighbour 1 are 1 hop apart, rank 0 and 2
    // are 2: a round trip with rank 2 pays the extra hop's latency twice, one with rank 1 not.
    const auto& p = pmr::detail::tofu::tofu_settings().model;
    REQUIRE(p.enabled);
    REQUIRE(p.hop_latency >= 0.04);
    REQUIRE(topo::hops(me.shape, node_of(0), node_of(2)) == 2);
    const double extra = 2 * p.hop_latency * p.time_scale;
    for (int peer : {1, 2}) {
        const int rank = grid.rank();
        if (rank != 0 && rank != peer) {
            continue;
        }
        pmr::Connection c(pmr::Target(grid, rank == 0 ? peer : 0, 3, 3), pmr::Provider::tofu);
        pmr::SendWindow<unsigned char> send(c, 8);
        pmr::RecvWindow<unsigned char> recv(c, 8);
        double fastest = 1e9;
        for (int round = 0; round < 3; ++round) {
            const auto start = std::chrono::steady_clock::now();
            recv.init();
            send.init();
            if (rank == 0) {
                send.post();
                send.wait();
                recv.post();
                recv.wait();
            } else {
                recv.post();
                recv.wait();
                send.post();
                send.wait();
            }
            fastest = std::min(
                fastest,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        if (rank == 0) {
            INFO("peer " << peer << ": fastest round trip " << fastest * 1e3 << " ms, the extra "
                         << "hop costs " << extra * 1e3 << " ms");
            if (peer == 1) {
                CHECK(fastest < extra);
            } else {
                CHECK(fastest >= extra);
            }
        }
    }
}
