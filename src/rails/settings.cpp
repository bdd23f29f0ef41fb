// SPDX-License-Identifier: MIT
#include "rails/settings.hpp"

#include "base/error.hpp"

#include <cctype>
#include <cstdlib>

namespace pmr::detail::rails {
namespace {

struct Variable {
    std::string name;
    const char* value = nullptr;
};

// The provider's own variable if set, else the generic one.
Variable lookup(std::string_view provider, const char* suffix) {
    std::string upper(provider);
    for (char& c : upper) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    for (const std::string& name : {"PMR_" + upper + "_" + suffix, std::string("PMR_") + suffix}) {
        const char* value = std::getenv(name.c_str()); // NOLINT(concurrency-mt-unsafe): set-up
        if (value != nullptr && *value != '\0') {
            return {name, value};
        }
    }
    return {};
}

[[noreturn]] void bad(const Variable& v, const std::string& why, const std::string& todo) {
    raise<ArgumentError>("environment variable " + v.name + "='" + v.value + "' " + why,
                         "rail settings", todo);
}

} // namespace

RailSettings read_rail_settings(std::string_view name, std::size_t max,
                                std::string (*check_device)(const std::string&)) {
    RailSettings s;
    const Variable devices = lookup(name, "DEVICES");
    if (devices.value != nullptr) {
        std::string current;
        for (const char* p = devices.value;; ++p) {
            if (*p == ',' || *p == '\0') {
                if (current.empty()) {
                    bad(devices, "has an empty entry",
                        "Give device names separated by commas, e.g. " + devices.name +
                            "=eth0,eth1.");
                }
                if (check_device != nullptr) {
                    if (const std::string why = check_device(current); !why.empty()) {
                        std::string what = "names '";
                        what += current;
                        what += "', ";
                        what += why;
                        bad(devices, what,
                            "List the devices the provider can use (e.g. `ip link`, "
                            "`ucx_info -d`, `ibv_devices`).");
                    }
                }
                s.devices.push_back(current);
                current.clear();
                if (*p == '\0') {
                    break;
                }
            } else if (*p != ' ') {
                current += *p;
            }
        }
        if (s.devices.size() > max) {
            bad(devices, "names more than " + std::to_string(max) + " devices",
                "Name fewer devices.");
        }
        s.rails = s.devices.size();
    }
    const Variable rails = lookup(name, "RAILS");
    if (rails.value != nullptr) {
        char* end = nullptr;
        const long n = std::strtol(rails.value, &end, 10);
        if (end == rails.value || *end != '\0' || n < 1 || n > static_cast<long>(max)) {
            bad(rails, "is not a rail count from 1 to " + std::to_string(max),
                "Unset it or give e.g. " + rails.name + "=2.");
        }
        if (!s.devices.empty() && static_cast<std::size_t>(n) != s.devices.size()) {
            bad(rails,
                "disagrees with the " + std::to_string(s.devices.size()) + " devices of " +
                    devices.name,
                "Set only one of them; " + devices.name + " opens one rail per device.");
        }
        s.rails = static_cast<std::size_t>(n);
        s.explicit_count = true;
    }
    return s;
}

} // namespace pmr::detail::rails
