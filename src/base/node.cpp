// SPDX-License-Identifier: MIT
#include "base/node.hpp"

#include <fstream>
#include <unistd.h>

namespace pmr::detail {

const std::string& node_name() {
    static const std::string name = [] {
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        std::string boot;
        std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
        return std::string(host) + "/" + boot;
    }();
    return name;
}

std::uint64_t hash_node_name(const std::string& name) noexcept {
    std::uint64_t hash = 14695981039346656037ULL;
    for (const char c : name) {
        hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    }
    return hash;
}

std::uint64_t node_key() {
    static const std::uint64_t key = hash_node_name(node_name());
    return key;
}

} // namespace pmr::detail
