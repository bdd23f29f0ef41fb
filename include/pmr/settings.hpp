// SPDX-License-Identifier: MIT
/// @file settings.hpp
/// The registry of settings: every `PMR_*` environment variable pmr reads, declared once with its
/// type, unit, default and description, parsed by one function per type.
///
/// One precedence rule holds for every setting: **a value given in code wins, else the
/// environment, else the default.** An option of a pmr type (NeighborOptions, AllreduceOptions)
/// left at its default value counts as not given, so the environment applies there.
///
/// Values are read from the environment at each look-up (so a variable set before an object is
/// made applies to that object); pmr looks settings up when it creates objects, never per message.
/// A variable set to the empty string counts as unset. Layers built on pmr (the MPI interposer,
/// QMP) declare their own settings with declare() and read them through the same functions;
/// `pmr-info` lists them all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pmr::settings {

/// How a setting's text is read. One parser per type, the same for every setting of that type.
enum class Type : unsigned char {
    /// `1`, `yes`, `on`, `true` or `0`, `no`, `off`, `false`.
    flag,
    /// A whole number, within the declared bounds.
    integer,
    /// A decimal number, within the declared bounds.
    number,
    /// Bytes: digits with an optional `K`, `M` or `G` (powers of 1024, either case), e.g. `64K`.
    size,
    /// A time: a number in the declared unit (`s` or `us`), or a number with its own unit among
    /// `ns`, `us`, `ms`, `s` (e.g. `500ms`); read as seconds.
    duration,
    /// One of the declared choices (each may have aliases).
    choice,
    /// Free text, checked by the code that uses it (a provider name, a device list, a shape).
    text,
};

/// Where a setting's value came from.
enum class Source : unsigned char {
    /// Neither the environment nor a default gives a value: the code that uses it decides.
    none,
    /// The declared default.
    default_value,
    /// The environment (the setting's own variable or the one it falls back to).
    environment,
};

/// One setting.
struct Setting {
    /// `PMR_...`, the environment variable.
    std::string name;
    Type type = Type::text;
    /// What the value counts: `B` (size), `s` or `us` (duration), `GB/s`, ...; may be empty.
    std::string unit;
    /// The default as text, parsed like a value from the environment; empty: no default (the
    /// code decides, see default_note).
    std::string default_value;
    /// What the setting does, one or a few sentences.
    std::string description;
    /// The group in listings: `core`, `shm`, `ucx`, `collectives`, ... (a provider's name where
    /// the setting belongs to one provider).
    std::string group;
    /// Type::choice: the allowed values, each "canonical|alias|alias" (e.g. "automatic|auto").
    std::vector<std::string> choices;
    /// Type::integer, number, size, duration: the smallest and largest value accepted (duration
    /// in seconds); equal (the default, both 0) means no bounds beyond the type's.
    double min = 0;
    double max = 0;
    /// Where unset, the value of this other setting applies (e.g. PMR_UCX_RAILS falls back to
    /// PMR_RAILS); empty: none.
    std::string falls_back_to;
    /// Shown instead of default_value in listings where the default is computed ("the timing
    /// model's", "1 in builds without NDEBUG").
    std::string default_note;
};

/// A setting's value as text and where it came from.
struct Value {
    std::string text;
    Source source = Source::none;
    /// The variable that gave the value (the setting's own or the one it falls back to); empty
    /// when not from the environment.
    std::string variable;
};

/// Declares a setting (for layers built on pmr). Declaring the same name again with the same type
/// is allowed and keeps the first declaration. @throws UsageError for a name that does not start
/// with `PMR_`, or that is declared already with another type.
void declare(const Setting& setting);

/// Every declared setting, in declaration order (pmr's own first).
std::vector<Setting> all();

/// The declaration of `name`. @throws UsageError if nothing declares it.
const Setting& find(std::string_view name);

/// The value of `name` as text, from the environment or the default. @throws UsageError if
/// nothing declares it.
Value value(std::string_view name);

/// Whether the environment gives `name` (or what it falls back to) a value.
bool from_environment(std::string_view name);

/// Checks the value of `name` against its type, choices and bounds.
/// @throws ArgumentError naming the variable, its value and what it should be.
void validate(std::string_view name);

/// Typed look-ups: the value parsed by its type's parser, or nothing where neither the
/// environment nor a default gives one. @throws ArgumentError naming the variable when the value
/// does not parse or is out of bounds; UsageError when `name` is undeclared or of another type.
std::optional<bool> flag(std::string_view name);
std::optional<std::int64_t> integer(std::string_view name);
std::optional<double> number(std::string_view name);
std::optional<std::size_t> size(std::string_view name);
/// In seconds.
std::optional<double> duration(std::string_view name);
/// The canonical spelling of the chosen value (its first spelling in the declaration).
std::optional<std::string> choice(std::string_view name);
std::optional<std::string> text(std::string_view name);

/// The precedence rule: `in_code` where given, else the setting read by `read` (a typed
/// look-up), else `fallback`.
template <class T, class Read>
T resolve(const std::optional<T>& in_code, std::string_view name, Read read, const T& fallback) {
    if (in_code) {
        return *in_code;
    }
    if (auto setting = read(name)) {
        return static_cast<T>(*setting);
    }
    return fallback;
}

/// "flag", "integer", "number", "size", "duration", "choice", "text".
std::string_view to_string(Type type) noexcept;
/// "-" (none), "default", "environment".
std::string_view to_string(Source source) noexcept;

/// Reads any environment variable (launcher variables such as OMPI_COMM_WORLD_LOCAL_SIZE, which
/// pmr reads but does not declare): its text, or nothing where unset or empty.
std::optional<std::string> environment(const char* name);

} // namespace pmr::settings
