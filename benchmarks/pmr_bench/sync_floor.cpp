// SPDX-License-Identifier: MIT
#include "sync_floor.hpp"

#include "mpi_check.hpp"

#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace pmr_bench {
namespace {

constexpr MPI_Aint line = 128; // a cache line and its neighbour, which x86 prefetches in pairs

void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

class SyncFloor final : public Variant {
public:
    SyncFloor(MPI_Comm node, bool yield)
        : Variant("sync-floor", Family::reference,
                  std::string("reference, no data: every rank stores its round number in a "
                              "shared cache line and waits for every rank's (") +
                      (yield ? "yielding the CPU: more ranks than CPUs" : "spinning") +
                      "); the floor of any collective among these ranks"),
          node_(node), yield_(yield) {}
    SyncFloor(const SyncFloor&) = delete;
    SyncFloor& operator=(const SyncFloor&) = delete;
    ~SyncFloor() override {
        // Both frees are collective: while an exception unwinds (another variant failed on this
        // rank) they could wait for ranks that never come, where main() would abort the job.
        if (std::uncaught_exceptions() == 0) {
            release_window();
            MPI_Comm_free(&node_);
        }
    }

    void prepare(std::size_t /*bytes*/) override {
        int size = 0;
        MPI_Comm_size(node_, &size);
        void* base = nullptr;
        check_mpi(MPI_Win_allocate_shared(line, 1, MPI_INFO_NULL, node_, &base, &window_),
                  "MPI_Win_allocate_shared");
        lines_.assign(static_cast<std::size_t>(size), nullptr);
        for (int r = 0; r < size; ++r) {
            MPI_Aint bytes = 0;
            int unit = 0;
            void* at = nullptr;
            check_mpi(MPI_Win_shared_query(window_, r, &bytes, &unit, &at), "MPI_Win_shared_query");
            lines_[static_cast<std::size_t>(r)] = static_cast<std::uint64_t*>(at);
        }
        int rank = 0;
        MPI_Comm_rank(node_, &rank);
        mine_ = lines_[static_cast<std::size_t>(rank)];
        round_ = 0;
        __atomic_store_n(mine_, round_, __ATOMIC_RELEASE);
        check_mpi(MPI_Barrier(node_), "MPI_Barrier"); // every line reset before the first round
    }

    void run(std::size_t iterations) override {
        for (std::size_t i = 0; i < iterations; ++i) {
            ++round_;
            __atomic_store_n(mine_, round_, __ATOMIC_RELEASE);
            for (std::uint64_t* other : lines_) {
                while (__atomic_load_n(other, __ATOMIC_ACQUIRE) < round_) {
                    if (yield_) {
                        sched_yield();
                    } else {
                        relax();
                    }
                }
            }
            next_round();
        }
    }

    void release() override { release_window(); }

private:
    void release_window() noexcept {
        if (window_ != MPI_WIN_NULL) {
            MPI_Win_free(&window_); // collective: every rank releases in the same order
        }
        lines_.clear();
        mine_ = nullptr;
    }

    MPI_Comm node_;
    bool yield_;
    MPI_Win window_ = MPI_WIN_NULL;
    std::vector<std::uint64_t*> lines_;
    std::uint64_t* mine_ = nullptr;
    std::uint64_t round_ = 0;
};

} // namespace

std::unique_ptr<Variant> make_sync_floor(const Context& context) {
    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(context.world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    int node_size = 0;
    MPI_Comm_size(node, &node_size);
    int smallest = 0;
    check_mpi(MPI_Allreduce(&node_size, &smallest, 1, MPI_INT, MPI_MIN, context.world),
              "MPI_Allreduce");
    if (smallest != context.size) {
        MPI_Comm_free(&node);
        return nullptr; // ranks on several nodes: no memory they all share
    }
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return std::make_unique<SyncFloor>(node, cpus > 0 && node_size > cpus);
}

} // namespace pmr_bench
