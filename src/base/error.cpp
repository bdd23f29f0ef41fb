// SPDX-License-Identifier: MIT
#include "base/error.hpp"

#include <cstring>

namespace pmr::detail {

std::string compose(const std::string& what, const std::string& where, const std::string& todo) {
    std::string message = "pmr: " + what;
    if (!where.empty()) {
        message += " [" + where + "]";
    }
    message += ".";
    if (!todo.empty()) {
        message += " " + todo;
    }
    return message;
}

void raise_system(const char* call, int error, const std::string& where, const std::string& todo) {
    char buffer[256] = {};
    // GNU strerror_r returns the message pointer, which may or may not be `buffer`.
    const char* text = strerror_r(error, buffer, sizeof buffer);
    raise<ProviderError>(std::string(call) + " failed: " + text, where, todo);
}

} // namespace pmr::detail
