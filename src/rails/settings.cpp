// SPDX-License-Identifier: MIT
#include "rails/settings.hpp"

#include "base/error.hpp"

#include <pmr/settings.hpp>

#include <cctype>

namespace pmr::detail::rails {
namespace {

// PMR_<PROVIDER>_<suffix>, which the registry falls back from to PMR_<suffix>.
std::string own_name(std::string_view provider, const char* suffix) {
    std::string name = "PMR_";
    for (char c : provider) {
        name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    name += '_';
    name += suffix;
    return name;
}

[[noreturn]] void bad(const pmr::settings::Value& v, const std::string& why,
                      const std::string& todo) {
    raise<ArgumentError>("environment variable " + v.variable + "='" + v.text + "' " + why,
                         "rail settings", todo);
}

} // namespace

RailSettings read_rail_settings(std::string_view name, std::size_t max,
                                std::string (*check_device)(const std::string&)) {
    RailSettings s;
    const std::string devices_name = own_name(name, "DEVICES");
    const pmr::settings::Value devices = pmr::settings::value(devices_name);
    if (devices.source == pmr::settings::Source::environment) {
        std::string current;
        for (const char* p = devices.text.c_str();; ++p) {
            if (*p == ',' || *p == '\0') {
                if (current.empty()) {
                    bad(devices, "has an empty entry",
                        "Give device names separated by commas, e.g. " + devices.variable +
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
    const std::string rails_name = own_name(name, "RAILS");
    if (const auto n = pmr::settings::integer(rails_name)) {
        const pmr::settings::Value rails = pmr::settings::value(rails_name);
        if (*n > static_cast<std::int64_t>(max)) {
            bad(rails, "is not a rail count from 1 to " + std::to_string(max),
                "Unset it or give e.g. " + rails.variable + "=2.");
        }
        if (!s.devices.empty() && static_cast<std::size_t>(*n) != s.devices.size()) {
            bad(rails,
                "disagrees with the " + std::to_string(s.devices.size()) + " devices of " +
                    devices.variable,
                "Set only one of them; " + devices.variable + " opens one rail per device.");
        }
        s.rails = static_cast<std::size_t>(*n);
        s.explicit_count = true;
    }
    return s;
}

} // namespace pmr::detail::rails
