// SPDX-License-Identifier: MIT
#include "options.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace pmr_bench {

void Options::declare(const std::string& name, Arity arity, const std::string& metavar,
                      const std::string& help, std::vector<std::string> defaults) {
    if (specs_.count(name) == 0) {
        order_.push_back(name);
    }
    specs_[name] = Spec{arity, metavar, help, std::move(defaults)};
}

const Options::Spec& Options::spec(const std::string& name) const {
    auto it = specs_.find(name);
    if (it == specs_.end()) {
        // Asking for an undeclared option is a bug in pmr-bench, not in the command line.
        throw std::logic_error("pmr-bench: option --" + name + " was never declared");
    }
    return it->second;
}

void Options::parse(const std::vector<std::string>& words) {
    std::size_t i = 0;
    while (i < words.size()) {
        const std::string& word = words[i];
        if (word.size() < 3 || word.compare(0, 2, "--") != 0) {
            throw UsageError("unexpected argument '" + word + "' (options start with --)");
        }
        std::string name = word.substr(2);
        std::vector<std::string> values;
        auto eq = name.find('=');
        if (eq != std::string::npos) {
            values.push_back(name.substr(eq + 1));
            name.erase(eq);
        }
        auto it = specs_.find(name);
        if (it == specs_.end()) {
            throw UsageError("unknown option --" + name);
        }
        ++i;
        // A value may itself start with '-' (a negative number) but never with "--".
        auto is_value = [&](std::size_t k) {
            return k < words.size() && words[k].compare(0, 2, "--") != 0;
        };
        switch (it->second.arity) {
        case Arity::flag:
            if (!values.empty()) {
                throw UsageError("option --" + name + " takes no value");
            }
            break;
        case Arity::one:
            if (values.empty()) {
                if (!is_value(i)) {
                    throw UsageError("option --" + name + " needs a value (" + it->second.metavar +
                                     ")");
                }
                values.push_back(words[i++]);
            }
            break;
        case Arity::many:
            while (is_value(i)) {
                values.push_back(words[i++]);
            }
            if (values.empty()) {
                throw UsageError("option --" + name + " needs at least one value (" +
                                 it->second.metavar + ")");
            }
            break;
        }
        given_[name] = std::move(values);
    }
}

bool Options::given(const std::string& name) const {
    spec(name);
    return given_.count(name) != 0;
}

bool Options::flag(const std::string& name) const {
    return given(name);
}

const std::vector<std::string>& Options::values(const std::string& name) const {
    const Spec& s = spec(name);
    auto it = given_.find(name);
    return it != given_.end() ? it->second : s.defaults;
}

std::string Options::value(const std::string& name) const {
    const auto& v = values(name);
    return v.empty() ? std::string() : v.front();
}

double Options::number(const std::string& name) const {
    std::string text = value(name);
    char* end = nullptr;
    errno = 0;
    double result = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno != 0) {
        throw UsageError("option --" + name + ": '" + text + "' is not a number");
    }
    return result;
}

long Options::integer(const std::string& name) const {
    std::string text = value(name);
    char* end = nullptr;
    errno = 0;
    long result = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0) {
        throw UsageError("option --" + name + ": '" + text + "' is not an integer");
    }
    return result;
}

std::vector<std::size_t> Options::sizes(const std::string& name) const {
    try {
        return parse_sizes(values(name));
    } catch (const UsageError& e) {
        throw UsageError("option --" + name + ": " + e.what());
    }
}

std::string Options::help() const {
    std::ostringstream out;
    for (const auto& name : order_) {
        const Spec& s = specs_.at(name);
        std::string head = "  --" + name + (s.metavar.empty() ? "" : " " + s.metavar);
        out << head;
        if (head.size() < 28) {
            out << std::string(28 - head.size(), ' ');
        } else {
            out << "\n" << std::string(28, ' ');
        }
        out << s.help;
        if (!s.defaults.empty() && s.arity != Arity::flag) {
            out << " [";
            for (std::size_t k = 0; k < s.defaults.size(); ++k) {
                out << (k ? " " : "") << s.defaults[k];
            }
            out << "]";
        }
        out << "\n";
    }
    return out.str();
}

std::size_t parse_size(const std::string& text) {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
        ++digits;
    }
    if (digits == 0) {
        throw UsageError("'" + text + "' is not a size (examples: 0, 4096, 4K, 16M)");
    }
    std::string unit = text.substr(digits);
    std::size_t scale = 1;
    if (unit.empty() || unit == "B") {
        scale = 1;
    } else if (unit == "K" || unit == "KiB" || unit == "k") {
        scale = std::size_t(1) << 10;
    } else if (unit == "M" || unit == "MiB") {
        scale = std::size_t(1) << 20;
    } else if (unit == "G" || unit == "GiB") {
        scale = std::size_t(1) << 30;
    } else {
        throw UsageError("unknown unit in size '" + text + "' (use B, K, M or G; binary units)");
    }
    unsigned long long number = std::strtoull(text.substr(0, digits).c_str(), nullptr, 10);
    if (number > std::numeric_limits<std::size_t>::max() / scale) {
        throw UsageError("size '" + text + "' is too large");
    }
    return static_cast<std::size_t>(number) * scale;
}

std::vector<std::size_t> parse_sizes(const std::vector<std::string>& words) {
    std::vector<std::size_t> result;
    for (const auto& word : words) {
        std::vector<std::string> parts;
        std::size_t start = 0;
        while (true) {
            auto colon = word.find(':', start);
            parts.push_back(word.substr(start, colon - start));
            if (colon == std::string::npos) {
                break;
            }
            start = colon + 1;
        }
        if (parts.size() == 1) {
            result.push_back(parse_size(parts[0]));
            continue;
        }
        if (parts.size() > 3) {
            throw UsageError("range '" + word + "' has more than first:last:factor");
        }
        std::size_t first = parse_size(parts[0]);
        std::size_t last = parse_size(parts[1]);
        std::size_t factor = parts.size() == 3 ? parse_size(parts[2]) : 2;
        if (factor < 2 || last < first) {
            throw UsageError("range '" + word + "' needs first <= last and a factor >= 2");
        }
        if (first == 0) {
            result.push_back(0);
            first = 1;
        }
        for (std::size_t s = first; s <= last; s *= factor) {
            result.push_back(s);
            if (s > last / factor) {
                break;
            }
        }
    }
    std::sort(result.begin(), result.end());
    result.erase(std::unique(result.begin(), result.end()), result.end());
    return result;
}

std::string format_size(std::size_t bytes) {
    static const char* const units[] = {"B", "KiB", "MiB", "GiB"};
    std::size_t unit = 0;
    while (unit < 3 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        ++unit;
    }
    return std::to_string(bytes) + " " + units[unit];
}

} // namespace pmr_bench
