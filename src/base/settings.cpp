// SPDX-License-Identifier: MIT
// The registry of settings (pmr/settings.hpp): the declarations, one parser per type, and the only
// reads of the environment in libpmr.
#include "base/settings_table.hpp"

#include "base/error.hpp"
#include "base/names.hpp"

#include <pmr/settings.hpp>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <sstream>
#include <utility>

namespace pmr::settings {
namespace {

struct Registry {
    std::mutex mutex;
    std::deque<Setting> settings; // a deque: find() hands out references that stay valid

    Registry() {
        for (Setting& s : detail::builtin_settings()) {
            settings.push_back(std::move(s));
        }
    }

    const Setting* lookup(std::string_view name) {
        std::lock_guard<std::mutex> lock(mutex);
        for (const Setting& s : settings) {
            if (s.name == name) {
                return &s;
            }
        }
        return nullptr;
    }
};

Registry& registry() {
    static Registry r;
    return r;
}

const Setting& declared(std::string_view name, Type type) {
    const Setting& s = find(name);
    if (s.type != type) {
        detail::raise<UsageError>(
            std::string(name) + " is a setting of type " + std::string(to_string(s.type)) +
                ", read as " + std::string(to_string(type)),
            "settings registry",
            "Read it with settings::" + std::string(to_string(s.type)) + "().");
    }
    return s;
}

[[noreturn]] void bad(const Setting& s, const Value& v, const std::string& why,
                      const std::string& todo) {
    if (v.source == Source::default_value) {
        detail::raise<UsageError>("the default '" + v.text + "' of " + s.name + " " + why,
                                  "settings registry", "Fix its declaration.");
    }
    detail::raise<ArgumentError>("environment variable " + v.variable + "='" + v.text + "' " + why,
                                 "settings of " + s.group, todo);
}

std::string example(const Setting& s) {
    if (!s.default_value.empty()) {
        return "Unset it (default " + s.default_value + ") or give e.g. " + s.name + "=" +
               s.default_value + ".";
    }
    return "Unset it or give a valid value (pmr-info --all describes " + s.name + ").";
}

bool bounded(const Setting& s) {
    return s.min != s.max;
}

void check_bounds(const Setting& s, const Value& v, double value, const std::string& unit) {
    if (bounded(s) && (value < s.min || value > s.max)) {
        const auto text = [](double x) {
            std::ostringstream out;
            out << x;
            return out.str();
        };
        bad(s, v, "is not from " + text(s.min) + " to " + text(s.max) + unit, example(s));
    }
}

// The parsers, one per type ----------------------------------------------------------------------

bool parse_flag(const Setting& s, const Value& v) {
    std::string lower;
    for (char c : v.text) {
        lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (lower == "1" || lower == "yes" || lower == "on" || lower == "true") {
        return true;
    }
    if (lower == "0" || lower == "no" || lower == "off" || lower == "false") {
        return false;
    }
    bad(s, v, "is not a yes/no setting", "Give 1 or 0 (or yes/no, on/off, true/false).");
}

std::int64_t parse_integer(const Setting& s, const Value& v) {
    const char* text = v.text.c_str();
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' ||
        std::isspace(static_cast<unsigned char>(*text))) {
        bad(s, v, "is not a whole number", example(s));
    }
    check_bounds(s, v, static_cast<double>(value), "");
    return value;
}

double parse_number(const Setting& s, const Value& v) {
    const char* text = v.text.c_str();
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    if (end == text || *end != '\0' || !std::isfinite(value) ||
        std::isspace(static_cast<unsigned char>(*text))) {
        bad(s, v, "is not a number", example(s));
    }
    check_bounds(s, v, value, s.unit.empty() ? "" : " " + s.unit);
    return value;
}

std::size_t parse_size(const Setting& s, const Value& v) {
    const char* text = v.text.c_str();
    const auto fail = [&] {
        bad(s, v, "is not a size in bytes",
            "Give a number with an optional K, M or G (powers of 1024), e.g. " + s.name + "=64K.");
    };
    if (!std::isdigit(static_cast<unsigned char>(*text))) {
        fail();
    }
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text, &end, 10);
    unsigned shift = 0;
    if (*end != '\0' && end[1] == '\0') {
        switch (std::toupper(static_cast<unsigned char>(*end))) {
        case 'K':
            shift = 10;
            break;
        case 'M':
            shift = 20;
            break;
        case 'G':
            shift = 30;
            break;
        default:
            fail();
        }
        ++end;
    }
    if (errno != 0 || *end != '\0' || (value << shift) >> shift != value) {
        fail();
    }
    const auto bytes = static_cast<std::size_t>(value << shift);
    check_bounds(s, v, static_cast<double>(bytes), " B");
    return bytes;
}

double parse_duration(const Setting& s, const Value& v) {
    const char* text = v.text.c_str();
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    const std::string suffix = end != nullptr ? end : "";
    double seconds_per_unit = s.unit == "us" ? 1e-6 : 1.0;
    if (suffix == "ns") {
        seconds_per_unit = 1e-9;
    } else if (suffix == "us") {
        seconds_per_unit = 1e-6;
    } else if (suffix == "ms") {
        seconds_per_unit = 1e-3;
    } else if (suffix == "s") {
        seconds_per_unit = 1.0;
    } else if (!suffix.empty()) {
        end = nullptr;
    }
    if (end == nullptr || end == text || !std::isfinite(value) || value < 0 ||
        std::isspace(static_cast<unsigned char>(*text))) {
        bad(s, v, "is not a time",
            "Give a non-negative number of " + s.unit +
                " or one with a unit (ns, us, ms, s), e.g. " + s.name + "=" +
                (s.default_value.empty() ? "1" : s.default_value) + ".");
    }
    const double result = value * seconds_per_unit;
    check_bounds(s, v, result, " s");
    return result;
}

std::string parse_choice(const Setting& s, const Value& v) {
    std::string listed;
    for (const std::string& spellings : s.choices) {
        std::size_t begin = 0;
        std::string canonical = spellings.substr(0, spellings.find('|'));
        while (begin <= spellings.size()) {
            std::size_t bar = spellings.find('|', begin);
            if (bar == std::string::npos) {
                bar = spellings.size();
            }
            if (spellings.compare(begin, bar - begin, v.text) == 0) {
                return canonical;
            }
            begin = bar + 1;
        }
        if (!listed.empty()) {
            listed += ", ";
        }
        listed += canonical;
        if (canonical.size() < spellings.size()) {
            std::string aliases = spellings.substr(canonical.size() + 1);
            for (char& c : aliases) {
                c = c == '|' ? '/' : c;
            }
            listed += " (" + aliases + ")";
        }
    }
    bad(s, v, "is not one of " + listed, example(s));
}

// The value of `name`, which must be of `type`, parsed by `parse`; nothing where it has none.
template <class Parse>
auto typed(std::string_view name, Type type, Parse parse)
    -> std::optional<decltype(parse(std::declval<const Setting&>(),
                                    std::declval<const Value&>()))> {
    const Setting& s = declared(name, type);
    const Value v = value(name);
    if (v.source == Source::none) {
        return std::nullopt;
    }
    return parse(s, v);
}

} // namespace

void declare(const Setting& setting) {
    if (setting.name.compare(0, 4, "PMR_") != 0) {
        detail::raise<UsageError>("setting '" + setting.name + "' does not start with PMR_",
                                  "settings::declare", "Name it PMR_<LAYER>_<WHAT>.");
    }
    Registry& r = registry();
    {
        std::lock_guard<std::mutex> lock(r.mutex);
        for (const Setting& s : r.settings) {
            if (s.name == setting.name) {
                if (s.type != setting.type) {
                    detail::raise<UsageError>(setting.name + " is declared already, as a " +
                                                  std::string(to_string(s.type)),
                                              "settings::declare", "Declare it once.");
                }
                return;
            }
        }
        r.settings.push_back(setting);
    }
}

std::vector<Setting> all() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    return {r.settings.begin(), r.settings.end()};
}

const Setting& find(std::string_view name) {
    if (const Setting* s = registry().lookup(name)) {
        return *s;
    }
    detail::raise<UsageError>("no setting " + std::string(name) + " is declared",
                              "settings registry",
                              "Declare it with pmr::settings::declare() (pmr-info lists them).");
}

Value value(std::string_view name) {
    const Setting* s = &find(name);
    for (int depth = 0; depth < 4; ++depth) {
        if (auto text = environment(s->name.c_str())) {
            return {*text, Source::environment, s->name};
        }
        if (s->falls_back_to.empty()) {
            break;
        }
        s = &find(s->falls_back_to);
    }
    const Setting& own = find(name);
    if (!own.default_value.empty()) {
        return {own.default_value, Source::default_value, {}};
    }
    return {};
}

bool from_environment(std::string_view name) {
    return value(name).source == Source::environment;
}

void validate(std::string_view name) {
    const Setting& s = find(name);
    switch (s.type) {
    case Type::flag:
        (void)flag(name);
        break;
    case Type::integer:
        (void)integer(name);
        break;
    case Type::number:
        (void)number(name);
        break;
    case Type::size:
        (void)size(name);
        break;
    case Type::duration:
        (void)duration(name);
        break;
    case Type::choice:
        (void)choice(name);
        break;
    case Type::text:
        break;
    }
}

std::optional<bool> flag(std::string_view name) {
    return typed(name, Type::flag, parse_flag);
}

std::optional<std::int64_t> integer(std::string_view name) {
    return typed(name, Type::integer, parse_integer);
}

std::optional<double> number(std::string_view name) {
    return typed(name, Type::number, parse_number);
}

std::optional<std::size_t> size(std::string_view name) {
    return typed(name, Type::size, parse_size);
}

std::optional<double> duration(std::string_view name) {
    return typed(name, Type::duration, parse_duration);
}

std::optional<std::string> choice(std::string_view name) {
    return typed(name, Type::choice, parse_choice);
}

std::optional<std::string> text(std::string_view name) {
    return typed(name, Type::text, [](const Setting&, const Value& v) { return v.text; });
}

std::string_view to_string(Type type) noexcept {
    constexpr detail::Named<Type> names[] = {
        {Type::flag, "flag"}, {Type::integer, "integer"},   {Type::number, "number"},
        {Type::size, "size"}, {Type::duration, "duration"}, {Type::choice, "choice"},
        {Type::text, "text"}};
    return detail::name_of(type, names, "text");
}

std::string_view to_string(Source source) noexcept {
    constexpr detail::Named<Source> names[] = {{Source::default_value, "default"},
                                               {Source::environment, "environment"},
                                               {Source::none, "-"}};
    return detail::name_of(source, names, "-");
}

std::optional<std::string> environment(const char* name) {
    const char* text = std::getenv(name); // NOLINT(concurrency-mt-unsafe): read at set-up only
    if (text == nullptr || *text == '\0') {
        return std::nullopt;
    }
    return std::string(text);
}

} // namespace pmr::settings
