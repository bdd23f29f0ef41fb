// SPDX-License-Identifier: MIT
// A probe for callgrind: rounds of 8 B on one connection to the own rank, the send posted in one
// form per run, so that the instructions of the forms compare in one build:
//   plain      post()                                   the whole window
//   elements   post(pmr::Elements{8})
//   size       post(std::size_t{8})                     deprecated byte spelling of elements
//   slices     post({pmr::RailSlice...})                multi-rail, in elements
//   ranges     post({pmr::RailRange...})                deprecated byte spelling of slices
// Usage: pmr-probe-post-forms FORM PROVIDER [PIECES], PROVIDER one of self, shm, ucx, tofu, PIECES
// 1 or 2 (two pieces need a connection with two rails: tofu). Count only the measured rounds:
//   PMR_TOFU_MODEL=off valgrind --tool=callgrind --toggle-collect='*measured_rounds*'
//     build/benchmarks/pmr-probe-post-forms slices tofu 2
// and divide the total by the rounds printed. docs/measurements.md has the numbers.
#include <pmr/pmr.hpp>

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

constexpr int rounds = 2000;

template <class Post>
void round(pmr::SendWindow<char>& send, pmr::RecvWindow<char>& recv, Post& post) {
    recv.init();
    recv.post();
    send.init();
    post();
    send.wait();
    recv.wait();
}

template <class Post>
[[gnu::noinline]] void measured_rounds(pmr::SendWindow<char>& send, pmr::RecvWindow<char>& recv,
                                       Post post) {
    for (int i = 0; i < rounds; ++i) {
        round(send, recv, post);
    }
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
bool run(const std::string& form, int pieces, pmr::SendWindow<char>& send,
         pmr::RecvWindow<char>& recv) {
    if (form == "plain") {
        measured_rounds(send, recv, [&] { send.post(); });
    } else if (form == "elements") {
        measured_rounds(send, recv, [&] { send.post(pmr::Elements{8}); });
    } else if (form == "size") {
        measured_rounds(send, recv, [&] { send.post(std::size_t{8}); });
    } else if (form == "slices" && pieces == 1) {
        measured_rounds(send, recv, [&] { send.post({pmr::RailSlice{0, 8, 0}}); });
    } else if (form == "slices") {
        measured_rounds(send, recv, [&] {
            send.post({pmr::RailSlice{0, 4, 0}, pmr::RailSlice{4, 4, 1}});
        });
    } else if (form == "ranges" && pieces == 1) {
        measured_rounds(send, recv, [&] { send.post({pmr::RailRange{0, 8, 0}}); });
    } else if (form == "ranges") {
        measured_rounds(send, recv, [&] {
            send.post({pmr::RailRange{0, 4, 0}, pmr::RailRange{4, 4, 1}});
        });
    } else {
        return false;
    }
    return true;
}
#pragma GCC diagnostic pop

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr,
                     "usage: %s plain|elements|size|slices|ranges self|shm|ucx|tofu [1|2]\n",
                     argv[0]);
        return 2;
    }
    MPI_Init(&argc, &argv);
    int status = 0;
    try {
        const std::string form = argv[1];
        const std::string name = argv[2];
        const int pieces = argc > 3 ? std::atoi(argv[3]) : 1;
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        pmr::Provider provider = pmr::Provider::self;
        if (name == "shm") {
            provider = pmr::Provider::shm;
        } else if (name == "ucx") {
            provider = pmr::Provider::ucx;
        } else if (name == "tofu") {
            provider = pmr::Provider::tofu;
        }
        pmr::Connection connection(pmr::Target(MPI_COMM_WORLD, rank, 0, 0), provider);
        pmr::SendWindow<char> send(connection, 8);
        pmr::RecvWindow<char> recv(connection, 8);
        auto whole = [&] { send.post(); };
        for (int i = 0; i < 10; ++i) { // the set-up and the first rounds, not measured
            round(send, recv, whole);
        }
        if (run(form, pieces, send, recv)) {
            std::printf("%s over %s (%zu rails), %d piece(s): %d rounds\n", form.c_str(),
                        name.c_str(), connection.rails(), pieces, rounds);
        } else {
            std::fprintf(stderr, "unknown form %s\n", form.c_str());
            status = 2;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        status = 1;
    }
    MPI_Finalize();
    return status;
}
