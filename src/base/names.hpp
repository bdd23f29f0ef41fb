// SPDX-License-Identifier: MIT
// The names of an enumeration's values as one table, read both ways: to print a value and to parse
// a setting or an option, so that the two cannot drift apart.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace pmr::detail {

template <class E>
struct Named {
    E value;
    std::string_view name;
};

/// The name of `value` in `names` (the first entry for it), or `otherwise`.
template <class E, std::size_t N>
constexpr std::string_view name_of(E value, const Named<E> (&names)[N],
                                   std::string_view otherwise) noexcept {
    for (const Named<E>& entry : names) {
        if (entry.value == value) {
            return entry.name;
        }
    }
    return otherwise;
}

/// The value named `name` in `names` (an entry per spelling), or none.
template <class E, std::size_t N>
constexpr std::optional<E> value_of(std::string_view name, const Named<E> (&names)[N]) noexcept {
    for (const Named<E>& entry : names) {
        if (entry.name == name) {
            return entry.value;
        }
    }
    return std::nullopt;
}

} // namespace pmr::detail
