// SPDX-License-Identifier: MIT
// The provider dispatch itself: a window's call into its provider through the variant the core
// holds (std::visit over Compiled::SendWindow), against calling the provider type directly, and the
// id switch (Compiled::dispatch) the core uses at set-up. Uses the internal provider interface
// (src/providers/interface.hpp), hence pmr_internal.
#include <benchmark/benchmark.h>

#include "providers/compiled.hpp"

#include <variant>

namespace {

using pmr::detail::Compiled;
using pmr::detail::Null;

pmr::detail::WindowSpec empty_spec() {
    return pmr::detail::WindowSpec{};
}

/// Null::SendWindow::test() called on the concrete type: the floor.
void BM_DirectCall(benchmark::State& state) {
    Null::SendWindow window(empty_spec());
    for (auto _ : state) {
        benchmark::DoNotOptimize(window.test());
        benchmark::ClobberMemory();
    }
}
BENCHMARK(BM_DirectCall);

/// The same call through the variant of every compiled provider, as the core makes it.
void BM_VariantDispatch(benchmark::State& state) {
    Compiled::SendWindow window(std::in_place_type<Null::SendWindow>, empty_spec());
    for (auto _ : state) {
        bool done = std::visit(
            [](auto& w) {
                if constexpr (std::is_same_v<std::decay_t<decltype(w)>, std::monostate>) {
                    return false;
                } else {
                    return w.test();
                }
            },
            window);
        benchmark::DoNotOptimize(done);
        benchmark::ClobberMemory();
    }
}
BENCHMARK(BM_VariantDispatch);

/// The provider-id switch used when connections and windows are set up.
void BM_IdDispatch(benchmark::State& state) {
    // Read through volatile so that the switch cannot be folded at compile time.
    volatile pmr::Provider source = pmr::Provider::null;
    for (auto _ : state) {
        const pmr::Provider id = source;
        int found = 0;
        Compiled::dispatch(id, [&](auto provider) { found = static_cast<int>(provider.id); });
        benchmark::DoNotOptimize(found);
    }
}
BENCHMARK(BM_IdDispatch);

} // namespace
