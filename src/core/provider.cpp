// SPDX-License-Identifier: MIT
// Provider names, the list of compiled providers and the choice among them: all derived from the
// provider types themselves (their id, preference and reach), never written out by hand.
#include "base/environment.hpp"
#include "base/error.hpp"
#include "core/state.hpp"

#include <pmr/provider.hpp>

#include <algorithm>
#include <array>

namespace pmr {
namespace {

#define PMR_PROVIDER_NAME(name) std::string_view(#name),
constexpr std::array names{PMR_PROVIDER_LIST(PMR_PROVIDER_NAME)};
#undef PMR_PROVIDER_NAME

struct Ranked {
    Provider id;
    int preference;
};

// The compiled providers: null and self first (chosen by the target), then by preference.
std::vector<Ranked> ranked_providers() {
    std::vector<Ranked> list;
    detail::Compiled::for_each([&](auto provider) {
        using P = decltype(provider);
        list.push_back({P::id, P::preference});
    });
    auto rank = [](const Ranked& r) {
        return r.id == Provider::null ? 2 : r.id == Provider::self ? 1 : r.preference > 0 ? 0 : -1;
    };
    std::stable_sort(list.begin(), list.end(), [&](const Ranked& a, const Ranked& b) {
        return rank(a) != rank(b) ? rank(a) > rank(b) : a.preference > b.preference;
    });
    return list;
}

} // namespace

ProviderTraits traits(Provider provider) noexcept {
    ProviderTraits t;
    detail::Compiled::dispatch(provider, [&](auto p) {
        using P = decltype(p);
        t.has_rails = P::has_rails;
        t.preference = P::preference;
        if constexpr (detail::check::has_split_hints<P>::value) {
            t.split_crossover_bytes = P::split_crossover_bytes;
            t.min_fragment_bytes = P::min_fragment_bytes;
        }
    });
    return t;
}

std::string_view to_string(Provider provider) noexcept {
    const auto index = static_cast<std::size_t>(provider);
    return index < names.size() ? names[index] : std::string_view("unknown");
}

std::optional<Provider> provider_from_string(std::string_view name) noexcept {
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (names[i] == name) {
            return static_cast<Provider>(i);
        }
    }
    return std::nullopt;
}

const std::vector<Provider>& compiled_providers() noexcept {
    static const std::vector<Provider> list = [] {
        std::vector<Provider> l;
        for (const Ranked& r : ranked_providers()) {
            l.push_back(r.id);
        }
        return l;
    }();
    return list;
}

bool is_compiled(Provider provider) noexcept {
    const auto& l = compiled_providers();
    return std::find(l.begin(), l.end(), provider) != l.end();
}

std::string compiled_providers_string() {
    std::string text;
    for (Provider p : compiled_providers()) {
        text += (text.empty() ? "" : ", ") + std::string(to_string(p));
    }
    return text;
}

namespace detail {

std::uint32_t compiled_mask() noexcept {
    static_assert(names.size() <= 32, "the provider mask of the handshake has 32 bits");
    std::uint32_t mask = 0;
    Compiled::for_each(
        [&](auto provider) { mask |= 1U << static_cast<unsigned>(decltype(provider)::id); });
    return mask;
}

std::optional<Provider> choose_provider(const PeerInfo& peer, std::uint32_t mask) {
    std::optional<Provider> best;
    int best_preference = 0;
    Compiled::for_each([&](auto provider) {
        using P = decltype(provider);
        if (P::preference > best_preference && (mask >> static_cast<unsigned>(P::id) & 1U) != 0 &&
            P::reaches(peer)) {
            best = P::id;
            best_preference = P::preference;
        }
    });
    return best;
}

std::optional<Provider> provider_from_environment(const std::string& where) {
    const auto& name = settings().provider;
    if (!name) {
        return std::nullopt;
    }
    auto provider = provider_from_string(*name);
    if (!provider || !is_compiled(*provider)) {
        raise<ArgumentError>(
            "PMR_PROVIDER=" + *name +
                (provider ? " is not compiled into this build" : " names no provider"),
            where, "Compiled providers: " + compiled_providers_string() + ".");
    }
    if (*provider == Provider::null || *provider == Provider::self) {
        raise<ArgumentError>("PMR_PROVIDER=" + *name + " cannot carry inter-process connections",
                             where,
                             "Use one of: " + compiled_providers_string() + " (not null, self).");
    }
    return provider;
}

} // namespace detail
} // namespace pmr
