// SPDX-License-Identifier: MIT
/// @file pingpong.cpp
/// Ping-pong between ranks 0 and 1 over one pmr connection: the smallest complete pmr program.
///
/// Rank 0 sends a message of `--size` bytes, rank 1 answers with a message of the same size, and
/// this repeats `--iterations` times. Half the round-trip time is the one-way latency; the message
/// size divided by it is the one-way bandwidth.
///
/// The connection and both windows are created once and reused for every round: that is what
/// "persistent" means in pmr, and it is where the speed comes from (set-up, memory registration and
/// the choice of transport happen once, not per message). The windows are library-owned, so pmr
/// places them in memory that its transports reach by their fastest path.
///
///     mpirun -np 2 pmr-pingpong --size 65536 --iterations 1000
///
/// Ranks beyond the first two take no part (they are allowed, so the example runs in any job).

#include <pmr/pmr.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

const char* const usage = R"(usage: mpirun -np 2 pmr-pingpong [options]

Ping-pong between ranks 0 and 1 with pmr windows; prints one-way latency and bandwidth.

options:
  --size BYTES        message size in bytes (default 8)
  --iterations N      timed round trips (default 1000)
  --warmup N          untimed round trips before timing (default 10)
  --help              print this text
)";

/// A mistake on the command line: every rank sees the same arguments, so every rank throws it.
class CommandLineError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Options {
    std::size_t size = 8;
    long long iterations = 1000;
    long long warmup = 10;
    bool help = false;
};

long long parse_integer(const std::string& option, const std::string& text, long long minimum) {
    std::size_t end = 0;
    long long value = 0;
    try {
        value = std::stoll(text, &end);
    } catch (const std::exception&) {
        end = 0;
    }
    if (end == 0 || end != text.size() || value < minimum) {
        throw CommandLineError(option + " expects an integer >= " + std::to_string(minimum) +
                               ", not '" + text + "'");
    }
    return value;
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
            options.size = static_cast<std::size_t>(parse_integer(name, value(), 0));
        } else if (name == "--iterations") {
            options.iterations = parse_integer(name, value(), 1);
        } else if (name == "--warmup") {
            options.warmup = parse_integer(name, value(), 0);
        } else {
            throw CommandLineError("unknown option '" + name + "'");
        }
    }
    return options;
}

/// Content of byte `i` of every ping; byte 0 is overwritten with the round number.
unsigned char pattern(std::size_t i) {
    return static_cast<unsigned char>(i * 131 + 7);
}

/// Runs the ping-pong on ranks 0 and 1 and returns the exit code.
int run(const Options& options) {
    int rank = 0;
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        std::fprintf(stderr, "pmr-pingpong needs 2 ranks: mpirun -np 2 pmr-pingpong\n");
        return 1;
    }
    if (rank > 1) {
        return 0;
    }
    const bool pinger = rank == 0;
    const int partner = 1 - rank;

    // Target(comm, p, a, b) on rank q pairs with Target(comm, q, b, a) on rank p. With a single
    // connection between the two ranks one tag is enough, and both sides can use the same.
    pmr::Connection connection(pmr::Target(MPI_COMM_WORLD, partner, 0, 0));

    // The k-th send window on a connection pairs with the k-th receive window on the partner's
    // connection, so both ranks create them in the same order: rank 0's ping goes to rank 1's
    // receive window and rank 1's pong to rank 0's.
    pmr::SendWindow<unsigned char> send(connection, options.size);
    pmr::RecvWindow<unsigned char> recv(connection, options.size);

    // The payload is written once: a send window keeps its content between rounds. Only a stamp
    // in byte 0 changes, so that a stale message would be noticed without copying every round.
    if (pinger) {
        for (std::size_t i = 0; i < send.size(); ++i) {
            send[i] = pattern(i);
        }
    }

    long long errors = 0;
    auto round_trip = [&](long long round) {
        const auto stamp = static_cast<unsigned char>(round);
        if (pinger) {
            // Grant the pong buffer before sending the ping, so that rank 1 never waits for the
            // permission to answer.
            recv.init();
            if (!send.empty()) {
                send[0] = stamp;
            }
            send.init();
            send.post();
            send.wait();
            recv.post();
            recv.wait();
            if (!recv.empty() && recv[0] != stamp) {
                ++errors;
            }
        } else {
            recv.init();
            recv.post();
            recv.wait();
            // Answer with the stamp of the ping just received: the pong proves a round trip.
            if (!recv.empty()) {
                send[0] = recv[0];
            }
            send.init();
            send.post();
            send.wait();
        }
    };

    // The first rounds complete the connection set-up (the handshake happens on first use) and
    // warm up caches; they are not timed.
    for (long long round = 0; round < options.warmup; ++round) {
        round_trip(round);
    }
    const double start = MPI_Wtime();
    for (long long round = 0; round < options.iterations; ++round) {
        round_trip(round);
    }
    const double elapsed = MPI_Wtime() - start;

    // Rank 1 checks the whole last ping once; the stamps checked every round catch stale data.
    if (!pinger) {
        for (std::size_t i = 1; i < recv.size(); ++i) {
            if (recv[i] != pattern(i)) {
                ++errors;
            }
        }
    }
    if (errors != 0) {
        std::fprintf(stderr, "rank %d: %lld wrong bytes or stamps received\n", rank, errors);
        return 1;
    }

    if (pinger) {
        const double latency = elapsed / static_cast<double>(options.iterations) / 2.0;
        const double bandwidth = static_cast<double>(options.size) / latency;
        const auto provider = pmr::to_string(connection.provider());
        std::printf("pmr ping-pong between rank 0 and rank 1 (provider %.*s)\n",
                    static_cast<int>(provider.size()), provider.data());
        std::printf("  message size  %zu B\n", options.size);
        std::printf("  iterations    %lld (after %lld warm-up round trips)\n", options.iterations,
                    options.warmup);
        std::printf("  latency       %.3f us one way (half the round trip)\n", latency * 1e6);
        std::printf("  bandwidth     %.1f MB/s one way\n", bandwidth * 1e-6);
    }
    return 0;
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
            std::fprintf(stderr, "pmr-pingpong: %s\n\n%s", error.what(), usage);
        }
        status = 2;
    } catch (const pmr::Error& error) {
        // The partner may be blocked in a wait for us: abort the whole job rather than hang.
        std::fprintf(stderr, "rank %d: pmr error: %s\n", rank, error.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    } catch (const std::exception& error) {
        std::fprintf(stderr, "rank %d: error: %s\n", rank, error.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return status;
}
