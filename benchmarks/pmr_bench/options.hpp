// SPDX-License-Identifier: MIT
/// @file options.hpp
/// A small command-line parser: `--name`, `--name value`, `--name v1 v2 ...`, with per-option help.
#pragma once

#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace pmr_bench {

/// Wrong command line; main() prints the message and the usage and exits with status 2.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

enum class Arity {
    flag, ///< `--verify`
    one,  ///< `--samples 20`
    many, ///< `--geom 2 1 1`: every following word up to the next `--option`
};

class Options {
public:
    /// Declares an option; `defaults` are its values when it is not given.
    void declare(const std::string& name, Arity arity, const std::string& metavar,
                 const std::string& help, std::vector<std::string> defaults = {});

    /// Parses the words after the command name. @throws UsageError for unknown options or values.
    void parse(const std::vector<std::string>& words);

    bool given(const std::string& name) const;
    bool flag(const std::string& name) const;
    std::string value(const std::string& name) const;
    const std::vector<std::string>& values(const std::string& name) const;
    double number(const std::string& name) const;
    long integer(const std::string& name) const;
    /// All values as byte counts, ranges expanded (see parse_sizes()).
    std::vector<std::size_t> sizes(const std::string& name) const;

    /// The option list with metavars, help and defaults, one per line.
    std::string help() const;

private:
    struct Spec {
        Arity arity;
        std::string metavar;
        std::string help;
        std::vector<std::string> defaults;
    };
    const Spec& spec(const std::string& name) const;

    std::vector<std::string> order_;
    std::map<std::string, Spec> specs_;
    std::map<std::string, std::vector<std::string>> given_;
};

/// "4096", "4K", "4KiB", "16M", "1G" -> bytes (binary units).
std::size_t parse_size(const std::string& text);

/// Expands size words: plain sizes, and ranges "first:last[:factor]" (factor 2 by default) that
/// multiply from `first` up to `last`; a range starting at 0 continues at 1. "0 8:16M" gives
/// 0, 8, 16, ..., 16 MiB. The result is sorted and without duplicates.
std::vector<std::size_t> parse_sizes(const std::vector<std::string>& words);

/// 4096 -> "4 KiB", 3000 -> "3000 B": the largest binary unit that divides exactly.
std::string format_size(std::size_t bytes);

} // namespace pmr_bench
