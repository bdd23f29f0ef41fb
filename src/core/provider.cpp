// SPDX-License-Identifier: MIT
#include <pmr/config.hpp>
#include <pmr/provider.hpp>

#include <algorithm>
#include <array>
#include <utility>

namespace pmr {
namespace {

constexpr std::array<std::pair<Provider, std::string_view>, 4> names{{
    {Provider::null, "null"},
    {Provider::self, "self"},
    {Provider::shm, "shm"},
    {Provider::ucx, "ucx"},
}};

} // namespace

std::string_view to_string(Provider provider) noexcept {
    for (const auto& [p, name] : names) {
        if (p == provider) {
            return name;
        }
    }
    return "unknown";
}

std::optional<Provider> provider_from_string(std::string_view name) noexcept {
    for (const auto& [p, n] : names) {
        if (n == name) {
            return p;
        }
    }
    return std::nullopt;
}

const std::vector<Provider>& compiled_providers() noexcept {
    static const std::vector<Provider> list = [] {
        std::vector<Provider> l{Provider::null, Provider::self};
        if (PMR_WITH_SHM) {
            l.push_back(Provider::shm);
        }
        if (PMR_WITH_UCX) {
            l.push_back(Provider::ucx);
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

} // namespace pmr
