// SPDX-License-Identifier: MIT
// The neighbour exchange (pmr/neighbor.hpp): every algorithm delivers the same bytes to the same
// places on Cartesian grids of 1 to 4 dimensions (extents 1, 2 and 3, periodic and open) and on
// explicit neighbour lists, with library-owned and user buffers; the split schedule; errors that
// throw instead of hanging. CTest runs it on 1 to 4 ranks, over shared memory and over UCX with
// 1, 2 and 4 rails on the loopback device.
#include "support.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <set>
#include <thread>

using namespace pmr_test;

namespace {

using Algorithm = pmr::NeighborAlgorithm;
constexpr Algorithm all_algorithms[] = {Algorithm::direct, Algorithm::split, Algorithm::automatic};

/// Rails the UCX connections between ranks should have (PMR_RAILS), 1 for local providers.
/// Rails the connections between ranks should have: PMR_RAILS for UCX, the TNIs for tofu
/// (PMR_TOFU_TNIS, else 4 for the models off and k, 6 for fugaku), 1 for local providers.
std::size_t expected_rails() {
    const auto provider = environment("PMR_PROVIDER");
    if (world_size() == 1 || !provider) {
        return 1;
    }
    if (*provider == "ucx") {
        const auto rails = environment("PMR_RAILS");
        return rails ? std::stoul(*rails) : 1;
    }
    if (*provider == "tofu") {
        if (const auto tnis = environment("PMR_TOFU_TNIS")) {
            return std::stoul(*tnis);
        }
        const auto model = environment("PMR_TOFU_MODEL");
        return model && (*model == "off" || *model == "k") ? 4 : 6;
    }
    return 1;
}

/// The element that `sender` puts at `element` of its message in direction `index` in `round`:
/// every byte names where it came from.
std::uint64_t value(int sender, std::size_t index, std::size_t element, int round) {
    std::uint64_t x = (std::uint64_t(sender) << 48) ^ (std::uint64_t(index) << 40) ^
                      (std::uint64_t(round) << 32) ^ element;
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ULL;
    return x ^ (x >> 29);
}

/// Options that split every message into one fragment per rail, however small.
pmr::NeighborOptions options_for(Algorithm algorithm, int tag_offset = 0) {
    pmr::NeighborOptions options;
    options.algorithm = algorithm;
    options.min_fragment_bytes = 1;
    options.crossover_bytes = 4096; // automatic: some messages split, others whole
    options.tag_offset = tag_offset;
    return options;
}

struct Shape {
    std::vector<int> dims;
    std::vector<bool> periodic;
};

std::string to_string(const Shape& shape) {
    std::ostringstream out;
    for (std::size_t d = 0; d < shape.dims.size(); ++d) {
        out << (d ? "x" : "") << shape.dims[d] << (shape.periodic[d] ? "p" : "o");
    }
    return out.str();
}

/// Grids of `size` ranks in 1 to 4 dimensions: every ordered factorisation into 1 and 2 factors,
/// a few of 3 and 4 (with extents 1 in different places), each all periodic, all open and mixed.
std::vector<Shape> shapes(int size) {
    std::vector<std::vector<int>> grids;
    grids.push_back({size});
    for (int a = 1; a <= size; ++a) {
        if (size % a == 0) {
            grids.push_back({a, size / a});
        }
    }
    grids.push_back({1, size, 1});
    grids.push_back({size, 1, 1, 1});
    if (size % 2 == 0) {
        grids.push_back({2, 1, size / 2});
        grids.push_back({1, 2, 1, size / 2});
    }
    std::vector<Shape> result;
    for (const auto& dims : grids) {
        for (int pattern = 0; pattern < 3; ++pattern) {
            Shape s{dims, {}};
            for (std::size_t d = 0; d < dims.size(); ++d) {
                s.periodic.push_back(pattern == 0 || (pattern == 2 && d % 2 == 0));
            }
            result.push_back(s);
        }
    }
    return result;
}

/// Counts per neighbour index of a Cartesian exchange: all `base`, or different per direction.
std::vector<std::size_t> counts_for(int dims, std::size_t base, bool varied) {
    std::vector<std::size_t> counts(2 * static_cast<std::size_t>(dims), base);
    if (varied) {
        for (std::size_t i = 0; i < counts.size(); ++i) {
            counts[i] = base + 3 * i + 1;
        }
    }
    return counts;
}

/// Runs `rounds` rounds of `exchange` on `cart` and checks every received element; returns the
/// received bytes of the last round, concatenated.
template <class Exchange>
std::vector<std::uint64_t> run_cartesian(Exchange& exchange, const pmr::Communicator& cart,
                                         int rounds, bool use_test) {
    const int me = cart.rank();
    std::vector<std::uint64_t> received;
    for (int round = 1; round <= rounds; ++round) {
        for (std::size_t i = 0; i < exchange.size(); ++i) {
            auto buffer = exchange.send(i);
            for (std::size_t e = 0; e < buffer.size(); ++e) {
                buffer[e] = value(me, i, e, round);
            }
            // Receive buffers of null neighbours are never written: a marker must survive.
            for (auto& x : exchange.recv(i)) {
                x = 0xdeadbeef;
            }
        }
        exchange.start();
        if (use_test && round % 2 == 0) {
            // One test() (which may complete some windows), then wait() for the rest.
            if (!exchange.test()) {
                exchange.wait();
            }
        } else if (use_test) {
            while (!exchange.test()) {
            }
        } else {
            exchange.wait();
        }
        received.clear();
        for (std::size_t i = 0; i < exchange.size(); ++i) {
            const auto buffer = exchange.recv(i);
            const int from = exchange.neighbor_rank(i);
            const std::size_t opposite = i ^ 1U; // index(d, -dir)
            std::size_t wrong = 0;
            for (std::size_t e = 0; e < buffer.size(); ++e) {
                const std::uint64_t expected =
                    from == MPI_PROC_NULL ? 0xdeadbeef : value(from, opposite, e, round);
                wrong += buffer[e] != expected ? 1 : 0;
            }
            INFO("neighbour " << i << " (rank " << from << "), " << buffer.size()
                              << " elements, round " << round << ": " << exchange.describe());
            REQUIRE(wrong == 0);
            received.insert(received.end(), buffer.begin(), buffer.end());
        }
    }
    return received;
}

} // namespace

TEST_CASE("the split schedule gives every rail 1/n of every message", "[neighbor][schedule]") {
    // The seed's example: 6 neighbours, 4 rails, 3 steps.
    CHECK(pmr::detail::split_schedule(6, 4).size() == 3);
    for (std::size_t messages = 1; messages <= 12; ++messages) {
        for (std::size_t rails = 1; rails <= 8; ++rails) {
            INFO(messages << " messages, " << rails << " rails");
            const auto plan = pmr::detail::split_schedule(messages, rails);
            const std::size_t d = std::gcd(messages, rails);
            REQUIRE(plan.size() == messages / d);
            std::vector<std::multiset<std::size_t>> carried(rails);
            for (const auto& step : plan) {
                REQUIRE(step.size() == rails);
                std::set<std::size_t> busy; // messages of this step
                for (std::size_t k = 0; k < rails; ++k) {
                    CHECK(step[k].size() == d); // d/n messages' worth on every rail
                    for (std::size_t m : step[k]) {
                        carried[k].insert(m);
                        busy.insert(m);
                    }
                }
            }
            for (std::size_t k = 0; k < rails; ++k) {
                std::multiset<std::size_t> all;
                for (std::size_t m = 0; m < messages; ++m) {
                    all.insert(m);
                }
                CHECK(carried[k] == all); // each message exactly once on every rail
            }
        }
    }
}

TEST_CASE("every algorithm delivers the same bytes on every Cartesian grid",
          "[neighbor][cartesian]") {
    const std::size_t rails = expected_rails();
    int tag_offset = 0;
    for (const Shape& shape : shapes(world_size())) {
        pmr::Communicator cart(MPI_COMM_WORLD, shape.dims, shape.periodic);
        const int dims = cart.dimensions();
        for (std::size_t base : {std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
            const bool varied = base == 7;
            std::vector<std::vector<std::uint64_t>> results;
            for (Algorithm algorithm : all_algorithms) {
                INFO("grid " << to_string(shape) << ", " << base << " elements"
                             << (varied ? " varied" : "") << ", " << pmr::to_string(algorithm));
                pmr::NeighborExchange<std::uint64_t> exchange(cart, counts_for(dims, base, varied),
                                                              options_for(algorithm, tag_offset));
                REQUIRE(exchange.size() == 2 * static_cast<std::size_t>(dims));
                for (int d = 0; d < dims; ++d) {
                    for (int dir : {-1, 1}) {
                        CHECK(exchange.neighbor_rank(exchange.index(d, dir)) ==
                              cart.neighbor(d, dir));
                    }
                }
                for (std::size_t i = 0; i < exchange.size(); ++i) {
                    const int peer = exchange.neighbor_rank(i);
                    const std::size_t count = exchange.send(i).size();
                    std::size_t fragments = 1;
                    if (peer == MPI_PROC_NULL) {
                        fragments = 0;
                    } else if (peer != cart.rank() && (algorithm == Algorithm::split ||
                                                       (algorithm == Algorithm::automatic &&
                                                        count * sizeof(std::uint64_t) >= 4096))) {
                        fragments = std::min(rails, count);
                    }
                    INFO("neighbour " << i << ": " << exchange.describe());
                    CHECK(exchange.fragments(i) == fragments);
                    // What the message uses: split only where it is cut (a message to no one or
                    // to the own rank goes whole, whatever the options ask).
                    CHECK(exchange.algorithm(i) ==
                          (fragments > 1 ? Algorithm::split : Algorithm::direct));
                }
                results.push_back(run_cartesian(exchange, cart, 3, algorithm == Algorithm::split));
            }
            CHECK(results[0] == results[1]);
            CHECK(results[0] == results[2]);
        }
        ++tag_offset; // tags of each grid apart from the previous grid's exchanges
        tag_offset %= 8;
    }
}

TEST_CASE("the 3D exchange over 6 neighbours in 3 steps with 4 rails", "[neighbor][steps]") {
    // 2x2x2 periodic on 8 ranks, or a smaller periodic grid: 6 messages to other ranks when
    // every extent is at least 2.
    std::vector<int> dims = {world_size() >= 8 ? 2 : world_size(), world_size() >= 8 ? 2 : 1,
                             world_size() >= 8 ? 2 : 1};
    pmr::Communicator cart(MPI_COMM_WORLD, dims, {true, true, true});
    pmr::NeighborExchange<std::uint64_t> exchange(cart, 4096, options_for(Algorithm::split));
    std::size_t remote = 0;
    for (std::size_t i = 0; i < exchange.size(); ++i) {
        remote += exchange.neighbor_rank(i) != cart.rank() ? 1 : 0;
    }
    const std::size_t rails = expected_rails();
    CHECK(exchange.rails() == (remote > 0 ? rails : 1));
    if (rails > 1 && remote > 0) {
        CHECK(exchange.steps() == remote / std::gcd(remote, rails));
    } else {
        CHECK(exchange.steps() == 0); // one rail: split is direct
    }
    run_cartesian(exchange, cart, 2, false);
}

TEST_CASE("user buffers and explicit neighbour lists", "[neighbor][explicit]") {
    const int size = world_size();
    const int me = world_rank();
    const int next = (me + 1) % size;
    const int prev = (me + size - 1) % size;
    // Rank r sends f(r) elements to the next rank and h(r) to the previous one.
    auto f = [](int r) { return 5 + 3 * static_cast<std::size_t>(r); };
    auto h = [](int r) { return 2000 + 11 * static_cast<std::size_t>(r); };
    std::vector<pmr::Neighbor> neighbors(3);
    neighbors[0] = {next, f(me), h(next), 0, 1};
    neighbors[1] = {prev, h(me), f(prev), 1, 0};
    neighbors[2] = {MPI_PROC_NULL, 3, 3, 0, 0};
    pmr::Communicator comm(MPI_COMM_WORLD);
    for (Algorithm algorithm : all_algorithms) {
        INFO(pmr::to_string(algorithm));
        std::vector<std::vector<std::uint64_t>> send(3), recv(3);
        std::vector<std::uint64_t*> send_pointers, recv_pointers;
        for (std::size_t i = 0; i < 3; ++i) {
            send[i].resize(neighbors[i].send_count);
            recv[i].resize(neighbors[i].recv_count, 7);
            send_pointers.push_back(send[i].data());
            recv_pointers.push_back(recv[i].data());
        }
        pmr::NeighborExchange<std::uint64_t> user(comm, neighbors, send_pointers, recv_pointers,
                                                  options_for(algorithm));
        pmr::NeighborExchange<std::uint64_t> owned(comm, neighbors, options_for(algorithm));
        CHECK(user.send(0).data() == send[0].data());
        CHECK(!pmr::is_pmr_memory(user.recv(1).data(), sizeof(std::uint64_t)));
        CHECK(pmr::is_pmr_memory(owned.recv(1).data(), owned.recv(1).size()));
        for (int round = 1; round <= 3; ++round) {
            for (std::size_t i = 0; i < 2; ++i) {
                for (std::size_t e = 0; e < send[i].size(); ++e) {
                    send[i][e] = value(me, i, e, round);
                    owned.send(i)[e] = value(me, i, e, -round);
                }
            }
            user.start();
            owned.start();
            owned.wait();
            while (!user.test()) {
            }
            // From next: what it sent to its previous (index 1); from prev: its index 0.
            for (std::size_t i = 0; i < 2; ++i) {
                const int from = i == 0 ? next : prev;
                const std::size_t index = i == 0 ? 1 : 0;
                std::size_t wrong = 0;
                for (std::size_t e = 0; e < recv[i].size(); ++e) {
                    wrong += recv[i][e] != value(from, index, e, round) ? 1 : 0;
                    wrong += owned.recv(i)[e] != value(from, index, e, -round) ? 1 : 0;
                }
                INFO("neighbour " << i << " round " << round << ": " << user.describe());
                CHECK(wrong == 0);
            }
            CHECK(recv[2] == std::vector<std::uint64_t>(3, 7));
        }
    }
}

TEST_CASE("six messages per rank on a ring: the same bytes with every algorithm",
          "[neighbor][explicit][six]") {
    // Three messages to each ring neighbour, of different sizes (the largest split on every rail,
    // the smallest into fewer fragments than rails or none), over user buffers: 6 messages per
    // rank, the seed's 3D case on a ring that 3 ranks can run. The received bytes must not
    // depend on the algorithm.
    const int size = world_size();
    const int me = world_rank();
    const int next = (me + 1) % size;
    const int prev = (me + size - 1) % size;
    const std::size_t counts[3] = {5, 1000, 65536 + 13}; // elements of 8 bytes
    std::vector<pmr::Neighbor> neighbors;
    for (int k = 0; k < 3; ++k) {
        const std::size_t c = counts[k];
        // To next with tags (2k, 2k+1); the next rank lists this rank as prev with them swapped.
        neighbors.push_back({next, c, c + 1, 2 * k, 2 * k + 1});
        neighbors.push_back({prev, c + 1, c, 2 * k + 1, 2 * k});
    }
    pmr::Communicator comm(MPI_COMM_WORLD);
    const std::size_t rails = expected_rails();
    std::vector<std::vector<std::uint64_t>> results;
    for (Algorithm algorithm : all_algorithms) {
        INFO(pmr::to_string(algorithm));
        std::vector<std::vector<std::uint64_t>> send(neighbors.size()), recv(neighbors.size());
        std::vector<std::uint64_t*> send_pointers, recv_pointers;
        for (std::size_t i = 0; i < neighbors.size(); ++i) {
            send[i].resize(neighbors[i].send_count);
            recv[i].resize(neighbors[i].recv_count, 7);
            send_pointers.push_back(send[i].data());
            recv_pointers.push_back(recv[i].data());
        }
        pmr::NeighborOptions options = options_for(algorithm, 0);
        options.min_fragment_bytes = 1024; // the 40-byte messages stay whole
        options.crossover_bytes = 16384;   // automatic: only the largest message is split
        pmr::NeighborExchange<std::uint64_t> exchange(comm, neighbors, send_pointers, recv_pointers,
                                                      options);
        INFO(exchange.describe());
        CHECK(exchange.rails() == rails);
        for (std::size_t i = 0; i < neighbors.size(); ++i) {
            const std::size_t bytes = neighbors[i].send_count * sizeof(std::uint64_t);
            std::size_t expected = 1;
            if (rails > 1 && (algorithm == Algorithm::split ||
                              (algorithm == Algorithm::automatic && bytes >= 16384))) {
                expected = std::max<std::size_t>(1, std::min(rails, bytes / 1024));
            }
            CHECK(exchange.fragments(i) == expected);
        }
        std::vector<std::uint64_t> received;
        for (int round = 1; round <= 3; ++round) {
            for (std::size_t i = 0; i < neighbors.size(); ++i) {
                for (std::size_t e = 0; e < send[i].size(); ++e) {
                    send[i][e] = value(me, i, e, round);
                }
            }
            exchange.start();
            exchange.wait();
            received.clear();
            for (std::size_t i = 0; i < neighbors.size(); ++i) {
                // Entry i (to next for even i) pairs with the peer's entry i ^ 1.
                const int from = i % 2 == 0 ? next : prev;
                std::size_t wrong = 0;
                for (std::size_t e = 0; e < recv[i].size(); ++e) {
                    wrong += recv[i][e] != value(from, i ^ 1U, e, round) ? 1 : 0;
                }
                INFO("neighbour " << i << " round " << round);
                CHECK(wrong == 0);
                received.insert(received.end(), recv[i].begin(), recv[i].end());
            }
        }
        results.push_back(received);
    }
    CHECK(results[0] == results[1]);
    CHECK(results[0] == results[2]);
}

TEST_CASE("one-rail connections send every message whole", "[neighbor][one-rail]") {
    if (expected_rails() > 1) {
        return; // the rail runs check the split; this case is about shm and self
    }
    pmr::Communicator cart(MPI_COMM_WORLD, {world_size()}, {true});
    pmr::NeighborExchange<float> exchange(cart, 100000, options_for(Algorithm::split));
    CHECK(exchange.rails() == 1);
    CHECK(exchange.steps() == 0);
    CHECK(exchange.fragments(0) == 1);
    CHECK(exchange.fragments(1) == 1);
    // split was asked for, but a message on one rail goes whole: direct.
    CHECK(exchange.algorithm() == Algorithm::split);
    CHECK(exchange.algorithm(0) == Algorithm::direct);
    CHECK(exchange.algorithm(1) == Algorithm::direct);
    const auto bad = message_of<pmr::ArgumentError>([&] { (void)exchange.algorithm(2); });
    CHECK(bad.find("neighbour index 2 is out of range") != std::string::npos);
}

TEST_CASE("mismatched neighbours throw on both ends instead of hanging", "[neighbor][errors]") {
    const int size = world_size();
    const int me = world_rank();
    const int next = (me + 1) % size;
    const int prev = (me + size - 1) % size;
    pmr::Communicator comm(MPI_COMM_WORLD);

    SECTION("counts") {
        // Every rank expects one element more from its previous rank than that rank sends.
        std::vector<pmr::Neighbor> neighbors = {{next, 10, 10, 0, 1}, {prev, 10, 11, 1, 0}};
        const auto what = message_of<pmr::SizeError>(
            [&] { pmr::NeighborExchange<int> exchange(comm, neighbors); });
        CHECK(what.find("rank " + std::to_string(me)) != std::string::npos);
        CHECK(what.find("11 elements") != std::string::npos);
        CHECK(what.find("10 elements") != std::string::npos);
    }
    SECTION("element types") {
        std::vector<pmr::Neighbor> neighbors = {{next, 4, 4, 0, 1}, {prev, 4, 4, 1, 0}};
        if (size == 1) {
            // Alone: the neighbour is the own rank; two exchanges of different types pair.
            pmr::NeighborExchange<int> a(comm, neighbors);
            return;
        }
        const auto what = message_of<pmr::ArgumentError>([&] {
            if (me % 2 == 0 && !(size % 2 == 1 && me == size - 1)) {
                pmr::NeighborExchange<double> exchange(comm, neighbors);
            } else {
                pmr::NeighborExchange<float> exchange(comm, neighbors);
            }
        });
        CHECK(what.find("same element type") != std::string::npos);
    }
    SECTION("algorithms") {
        if (size % 2 == 1) {
            return; // ring neighbours must alternate
        }
        std::vector<pmr::Neighbor> neighbors = {{next, 4, 4, 0, 1}, {prev, 4, 4, 1, 0}};
        const auto what = message_of<pmr::ArgumentError>([&] {
            pmr::NeighborExchange<int> exchange(
                comm, neighbors, options_for(me % 2 ? Algorithm::split : Algorithm::direct));
        });
        CHECK(what.find("PMR_NEIGHBOR_ALGORITHM") != std::string::npos);
    }
    SECTION("buffer lists") {
        std::vector<pmr::Neighbor> neighbors = {{next, 4, 4, 0, 1}};
        int buffer[4] = {};
        const std::vector<int*> one = {buffer};
        const std::vector<int*> none;
        CHECK_THROWS_AS(pmr::NeighborExchange<int>(comm, neighbors, one, none), pmr::ArgumentError);
    }
    SECTION("no grid") {
        CHECK_THROWS_AS(pmr::NeighborExchange<int>(comm, 4), pmr::UsageError);
    }
}

TEST_CASE("the state machine of start, wait and test", "[neighbor][usage]") {
    pmr::Communicator cart(MPI_COMM_WORLD, {world_size()}, {true});
    pmr::NeighborExchange<int> exchange(cart, 16);
    CHECK_THROWS_AS(exchange.wait(), pmr::UsageError);
    CHECK_THROWS_AS(exchange.test(), pmr::UsageError);
    CHECK_THROWS_AS(exchange.send(2), pmr::ArgumentError);
    exchange.start();
    CHECK_THROWS_AS(exchange.start(), pmr::UsageError);
    exchange.wait();
    exchange.start();
    exchange.wait();
}

TEST_CASE("wait() after a Timeout waits for the rest of the round", "[.][timeout]") {
    // Run with PMR_TIMEOUT=1 on 3 ranks: rank 2 starts its round late, so ranks 0 and 1 complete
    // their messages with each other, time out on those with rank 2, and wait again.
    start_together();
    pmr::Communicator cart(MPI_COMM_WORLD, {world_size()}, {true});
    pmr::NeighborExchange<int> exchange(cart, 16);
    const int me = cart.rank();
    const int late = cart.size() - 1;
    for (int round = 0; round < 2; ++round) {
        for (std::size_t i = 0; i < exchange.size(); ++i) {
            std::fill(exchange.send(i).begin(), exchange.send(i).end(), 1000 * round + me);
            std::fill(exchange.recv(i).begin(), exchange.recv(i).end(), -1);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (round == 0 && me == late) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        }
        exchange.start();
        // A UsageError for a window waited on twice would propagate and fail the test.
        // Rank 1 goes on with test() after its wait() timed out, rank 0 with wait().
        const int timeouts = pmr_test::wait_through_timeouts(exchange, me == 1);
        if (round == 0 && me != late) {
            CHECK(timeouts >= 1); // the late rank's messages are 2.5 s late: PMR_TIMEOUT=1
        } else {
            CHECK(timeouts == 0);
        }
        for (std::size_t i = 0; i < exchange.size(); ++i) {
            const int from = exchange.neighbor_rank(i);
            INFO("round " << round << ", neighbour " << i << " (rank " << from << ")");
            CHECK(std::all_of(exchange.recv(i).begin(), exchange.recv(i).end(),
                              [&](int v) { return v == 1000 * round + from; }));
        }
    }
}

TEST_CASE("PMR_NEIGHBOR_ALGORITHM applies where the options leave the algorithm automatic",
          "[neighbor][environment]") {
    pmr::Communicator cart(MPI_COMM_WORLD, {world_size()}, {true});
    ::setenv("PMR_NEIGHBOR_ALGORITHM", "split", 1);
    {
        pmr::NeighborExchange<int> exchange(cart, 16);
        CHECK(exchange.algorithm() == Algorithm::split);
        exchange.start();
        exchange.wait();
    }
    {
        // A choice in code wins over the environment (pmr/settings.hpp).
        pmr::NeighborExchange<int> exchange(cart, 16, options_for(Algorithm::direct));
        CHECK(exchange.algorithm() == Algorithm::direct);
        exchange.start();
        exchange.wait();
    }
    ::setenv("PMR_NEIGHBOR_ALGORITHM", "sideways", 1);
    const auto what =
        message_of<pmr::ArgumentError>([&] { pmr::NeighborExchange<int> exchange(cart, 16); });
    CHECK(what.find("PMR_NEIGHBOR_ALGORITHM='sideways'") != std::string::npos);
    CHECK(what.find("automatic (auto), direct, split") != std::string::npos);
    ::unsetenv("PMR_NEIGHBOR_ALGORITHM");
    ::setenv("PMR_NEIGHBOR_CROSSOVER", "12Q", 1);
    CHECK_THROWS_AS(pmr::NeighborExchange<int>(cart, 16), pmr::ArgumentError);
    ::setenv("PMR_NEIGHBOR_CROSSOVER", "1K", 1);
    {
        pmr::NeighborExchange<int> exchange(cart, 16);
        CHECK(exchange.algorithm() == Algorithm::automatic);
        CHECK(exchange.crossover_bytes() == 1024U);
    }
    ::unsetenv("PMR_NEIGHBOR_CROSSOVER");
}

TEST_CASE("automatic calibrates once and every rank makes the same choice",
          "[neighbor][calibration]") {
    // A 2D grid (a ring on 1 to 3 ranks): 4 messages per rank, large enough to be split on
    // several rails. Calibration decides split or direct for all splittable messages at once.
    const int size = world_size();
    std::vector<int> dims =
        size % 2 == 0 && size > 2 ? std::vector<int>{2, size / 2} : std::vector<int>{size, 1};
    pmr::Communicator cart(MPI_COMM_WORLD, dims, {true, true});
    pmr::NeighborOptions options;
    options.algorithm = Algorithm::automatic; // no crossover: calibrate
    options.min_fragment_bytes = 1;
    std::vector<std::vector<std::uint64_t>> results;
    for (Algorithm algorithm : all_algorithms) {
        pmr::NeighborOptions o = options;
        o.algorithm = algorithm;
        if (algorithm != Algorithm::automatic) {
            o.crossover_bytes = 4096;
        }
        pmr::NeighborExchange<std::uint64_t> exchange(cart, 2048, o);
        if (algorithm == Algorithm::automatic) {
            INFO(exchange.describe());
            // The choice as this rank made it: 1 split, 0 direct, -1 nothing splittable.
            int choice = -1;
            bool mixed = false;
            for (std::size_t i = 0; i < exchange.size(); ++i) {
                const int peer = exchange.neighbor_rank(i);
                if (peer == MPI_PROC_NULL || peer == cart.rank() || exchange.rails() <= 1) {
                    continue;
                }
                const int here = exchange.fragments(i) > 1 ? 1 : 0;
                mixed = mixed || (choice != -1 && choice != here);
                choice = here;
            }
            CHECK_FALSE(mixed);
            const std::size_t crossover = exchange.crossover_bytes();
            if (choice == 1) {
                CHECK(crossover == 0);
            } else if (choice == 0) {
                CHECK(crossover == std::numeric_limits<std::size_t>::max());
            }
            std::vector<int> all(static_cast<std::size_t>(size));
            MPI_Allgather(&choice, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
            for (int c : all) {
                CHECK((c == -1 || choice == -1 || c == choice));
            }
        }
        results.push_back(run_cartesian(exchange, cart, 3, false));
    }
    CHECK(results[0] == results[1]);
    CHECK(results[0] == results[2]);
}

TEST_CASE("a calibrating rank and a rank with a given crossover refuse each other",
          "[neighbor][calibration][errors]") {
    const int size = world_size();
    if (size % 2 == 1) {
        return; // ring neighbours must alternate
    }
    const int me = world_rank();
    pmr::Communicator comm(MPI_COMM_WORLD);
    std::vector<pmr::Neighbor> neighbors = {{(me + 1) % size, 4, 4, 0, 1},
                                            {(me + size - 1) % size, 4, 4, 1, 0}};
    pmr::NeighborOptions options;
    options.crossover_bytes = me % 2 == 0 ? 0 : 4096;
    const auto what = message_of<pmr::ArgumentError>(
        [&] { pmr::NeighborExchange<int> exchange(comm, neighbors, options); });
    CHECK(what.find("PMR_NEIGHBOR_CALIBRATE") != std::string::npos);
    CHECK(what.find("rank " + std::to_string(me)) != std::string::npos);
}

TEST_CASE("PMR_NEIGHBOR_CALIBRATE=0 takes the default crossover", "[neighbor][environment]") {
    pmr::Communicator cart(MPI_COMM_WORLD, {world_size()}, {true});
    ::setenv("PMR_NEIGHBOR_CALIBRATE", "0", 1);
    {
        pmr::NeighborExchange<int> exchange(cart, 16);
        CHECK(exchange.crossover_bytes() != 0);
        CHECK(exchange.crossover_bytes() != std::numeric_limits<std::size_t>::max());
        exchange.start();
        exchange.wait();
    }
    ::setenv("PMR_NEIGHBOR_CALIBRATE", "maybe", 1);
    CHECK_THROWS_AS(pmr::NeighborExchange<int>(cart, 16), pmr::ArgumentError);
    ::unsetenv("PMR_NEIGHBOR_CALIBRATE");
}
