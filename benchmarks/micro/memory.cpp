// SPDX-License-Identifier: MIT
// pmr::allocate (shareable, registered memory) against the C library's aligned_alloc, with and
// without touching every page: the first is what a window of library-owned memory costs to make.
#include <benchmark/benchmark.h>

#include <pmr/memory.hpp>

#include <cstdlib>
#include <cstring>

namespace {

/// Keeps the allocation from being optimised away. Through a const copy: DoNotOptimize on a
/// mutable pointer uses an in-out asm operand, which GCC 12 with AddressSanitizer miscompiles
/// (the pointer freed afterwards was a stack address).
void observe(const char* pointer) {
    const char* const copy = pointer;
    benchmark::DoNotOptimize(copy);
}

void byte_sizes(benchmark::internal::Benchmark* b) {
    b->Arg(64)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20);
}

void BM_PmrAllocate(benchmark::State& state, bool touch) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    for (auto _ : state) {
        char* p = pmr::allocate<char>(bytes);
        if (touch) {
            std::memset(p, 1, bytes);
        }
        observe(p);
        pmr::deallocate(p);
    }
}
BENCHMARK_CAPTURE(BM_PmrAllocate, untouched, false)->Apply(byte_sizes);
BENCHMARK_CAPTURE(BM_PmrAllocate, touched, true)->Apply(byte_sizes);

void BM_AlignedAlloc(benchmark::State& state, bool touch) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    const std::size_t rounded = (bytes + 4095) / 4096 * 4096;
    for (auto _ : state) {
        auto* p = static_cast<char*>(std::aligned_alloc(4096, rounded));
        if (touch) {
            std::memset(p, 1, bytes);
        }
        observe(p);
        std::free(p);
    }
}
BENCHMARK_CAPTURE(BM_AlignedAlloc, untouched, false)->Apply(byte_sizes);
BENCHMARK_CAPTURE(BM_AlignedAlloc, touched, true)->Apply(byte_sizes);

/// The lookup every user-buffer window does: is this pmr memory?
void BM_IsPmrMemory(benchmark::State& state) {
    char* p = pmr::allocate<char>(1 << 20);
    for (auto _ : state) {
        benchmark::DoNotOptimize(pmr::is_pmr_memory(p + 4096, 4096));
    }
    pmr::deallocate(p);
}
BENCHMARK(BM_IsPmrMemory);

} // namespace
