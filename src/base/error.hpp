// SPDX-License-Identifier: MIT
// The one place native failures become pmr exceptions, and the shape of every message:
//   "pmr: <what> [<where>]. <what to do>"
#pragma once

#include <pmr/error.hpp>

#include <string>

namespace pmr::detail {

std::string compose(const std::string& what, const std::string& where, const std::string& todo);

/// Throws E with a composed message.
template <class E>
[[noreturn]] void raise(const std::string& what, const std::string& where,
                        const std::string& todo = {}) {
    throw E(compose(what, where, todo));
}

/// Throws ProviderError for a failed system call `call` with errno value `error`.
[[noreturn]] void raise_system(const char* call, int error, const std::string& where,
                               const std::string& todo = {});

} // namespace pmr::detail
