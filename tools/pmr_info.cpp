// SPDX-License-Identifier: MIT
// pmr-info: what this pmr is (version, providers), what it finds on this machine (CPUs, network and
// InfiniBand devices, the rails each provider would open) and every setting with its value and
// where the value came from. Built on the public API only; needs no MPI launcher.
//   pmr-info              the summary and every setting
//   pmr-info --all        the same with each setting's description
//   pmr-info --markdown   docs/settings.md (the settings as Markdown tables, independent of the
//                         environment and of the build)
#include <pmr/config.hpp>
#include <pmr/error.hpp>
#include <pmr/provider.hpp>
#include <pmr/settings.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <iostream>
#include <net/if.h>
#include <sched.h>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

namespace settings = pmr::settings;

std::vector<std::string> directory(const std::string& path) {
    std::vector<std::string> names;
    if (DIR* dir = opendir(path.c_str())) {
        while (const dirent* entry = readdir(dir)) {
            const std::string name = entry->d_name;
            if (name != "." && name != "..") {
                names.push_back(name);
            }
        }
        closedir(dir);
    }
    return names;
}

std::string first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

std::string join(const std::vector<std::string>& items, const char* separator = ", ") {
    std::string out;
    for (const std::string& item : items) {
        out += (out.empty() ? "" : separator) + item;
    }
    return out;
}

// A value with its unit, except a size with its own suffix ("64K").
std::string with_unit(const settings::Setting& s, const std::string& value) {
    if (s.unit.empty() || value.empty() ||
        !std::isdigit(static_cast<unsigned char>(value.back()))) {
        return value;
    }
    return value + " " + s.unit;
}

std::string shown_default(const settings::Setting& s) {
    if (!s.default_note.empty()) {
        return s.default_note;
    }
    if (!s.falls_back_to.empty()) {
        return "that of " + s.falls_back_to;
    }
    return s.default_value.empty() ? "none" : with_unit(s, s.default_value);
}

std::string kind(const settings::Setting& s) {
    std::string text(settings::to_string(s.type));
    if (s.type == settings::Type::choice) {
        std::vector<std::string> canonical;
        for (const std::string& spellings : s.choices) {
            std::string shown = spellings;
            for (char& c : shown) {
                c = c == '|' ? '/' : c;
            }
            canonical.push_back(shown);
        }
        text += ": " + join(canonical, ", ");
    } else if (!s.unit.empty()) {
        text += " (" + s.unit + ")";
    }
    if (s.min != s.max) {
        std::ostringstream bounds;
        bounds << ", " << s.min << " to " << s.max;
        text += bounds.str();
    }
    if (!s.falls_back_to.empty()) {
        text += "; unset: " + s.falls_back_to;
    }
    return text;
}

// ---- The machine --------------------------------------------------------------------------------

void print_machine() {
    std::cout << "\nThis machine\n";
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::cout << "  host:               " << host << "\n";
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t mask;
    CPU_ZERO(&mask);
    const long allowed = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : online;
    std::cout << "  CPUs:               " << online << " online, " << allowed
              << " this process may run on\n";

    std::vector<std::string> interfaces;
    if (struct if_nameindex* list = if_nameindex()) {
        for (const struct if_nameindex* i = list; i->if_index != 0; ++i) {
            const std::string state =
                first_line(std::string("/sys/class/net/") + i->if_name + "/operstate");
            interfaces.push_back(std::string(i->if_name) +
                                 (state.empty() ? "" : " (" + state + ")"));
        }
        if_freenameindex(list);
    }
    std::cout << "  network devices:    " << (interfaces.empty() ? "none" : join(interfaces))
              << "\n";
    std::vector<std::string> ports;
    for (const std::string& device : directory("/sys/class/infiniband")) {
        for (const std::string& port : directory("/sys/class/infiniband/" + device + "/ports")) {
            std::string base = "/sys/class/infiniband/";
            base += device;
            base += "/ports/";
            base += port;
            std::string shown = device;
            shown += ':';
            shown += port;
            shown += " (";
            shown += first_line(base + "/link_layer");
            shown += ", ";
            shown += first_line(base + "/state");
            shown += ')';
            ports.push_back(shown);
        }
    }
    std::cout << "  RDMA ports:         " << (ports.empty() ? "none" : join(ports)) << "\n";

    // The rails each provider with rails would open, as its settings say.
    for (const char* provider : {"ucx", "verbs", "tofu"}) {
        const auto which = pmr::provider_from_string(provider);
        if (!which || !pmr::is_compiled(*which)) {
            continue;
        }
        std::string upper = "PMR_";
        for (const char* c = provider; *c != '\0'; ++c) {
            upper += static_cast<char>(*c - 'a' + 'A');
        }
        const settings::Value devices = settings::value(upper + "_DEVICES");
        const settings::Value rails = settings::value(upper + "_RAILS");
        std::string line;
        if (devices.source == settings::Source::environment) {
            line = "one per device of " + devices.variable + ": " + devices.text;
        } else if (rails.source == settings::Source::environment) {
            line = rails.text + " (" + rails.variable + "), devices of the provider's choice";
        } else if (std::string(provider) == "tofu") {
            const settings::Value tnis = settings::value("PMR_TOFU_TNIS");
            line =
                tnis.source == settings::Source::environment
                    ? "one per TNI: " + tnis.text + " (PMR_TOFU_TNIS)"
                    : "one per TNI of the timing model " + settings::value("PMR_TOFU_MODEL").text;
        } else {
            line = "1, device of the provider's choice";
        }
        std::cout << "  rails (" << provider
                  << "):" << std::string(11 - std::string(provider).size(), ' ') << line << "\n";
    }
}

// ---- The settings -------------------------------------------------------------------------------

int print_settings(bool descriptions) {
    std::vector<std::string> errors;
    std::string group;
    std::cout << "\nSettings (a value in code wins, else the environment, else the default)\n";
    for (const settings::Setting& s : settings::all()) {
        if (s.group != group) {
            group = s.group;
            std::cout << "  [" << group << "]\n";
        }
        const settings::Value v = settings::value(s.name);
        std::string value = v.source == settings::Source::none ? "-" : v.text;
        std::string source(settings::to_string(v.source));
        if (v.source == settings::Source::environment && v.variable != s.name) {
            source += " (" + v.variable + ")";
        }
        if (v.source == settings::Source::none) {
            source = "unset: " + shown_default(s);
        }
        try {
            settings::validate(s.name);
        } catch (const pmr::Error& e) {
            errors.emplace_back(e.what());
            source += ", INVALID";
        }
        std::string name = "    " + s.name;
        name.resize(std::max<std::size_t>(name.size() + 1, 30), ' ');
        std::string shown = with_unit(s, value);
        shown.resize(std::max<std::size_t>(shown.size() + 1, 14), ' ');
        std::cout << name << shown << source << "\n";
        if (descriptions) {
            std::cout << "        " << kind(s) << "; default " << shown_default(s) << "\n";
            std::cout << "        " << s.description << "\n";
        }
    }
    for (const std::string& e : errors) {
        std::cerr << "pmr-info: " << e << "\n";
    }
    return errors.empty() ? 0 : 1;
}

std::string cell(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == '|') {
            out += "\\|";
        } else {
            out += c;
        }
    }
    return out;
}

void print_markdown() {
    std::cout << "# Settings\n\n"
                 "<!-- Generated by `pmr-info --markdown` from the registry "
                 "(src/base/settings_table.cpp); do not edit. Regenerate with\n"
                 "     scripts/settings-docs.sh build/bin/pmr-info -->\n\n"
                 "Every `PMR_*` environment variable pmr reads. One rule for all of them: a value "
                 "given in code\n(a constructor argument, an option of `NeighborOptions` or "
                 "`AllreduceOptions` other than its\ndefault) wins, else the environment, else the "
                 "default. A variable set to the empty string counts\nas unset. Sizes take `K`, "
                 "`M` or `G` (powers of 1024); flags `1`/`0` (or yes/no, on/off,\ntrue/false); "
                 "durations a number in the unit shown or with its own (`ns`, `us`, `ms`, `s`).\n"
                 "A malformed value is an `ArgumentError` naming the variable, from the first pmr "
                 "object that\nreads it. `pmr-info` prints every setting with its value and where "
                 "it came from; `pmr-info --all`\nadds these descriptions.\n";
    std::string group;
    for (const settings::Setting& s : settings::all()) {
        if (s.group != group) {
            group = s.group;
            std::cout << "\n## " << group << "\n\n| variable | type | default | effect |\n"
                      << "| --- | --- | --- | --- |\n";
        }
        std::cout << "| `" << s.name << "` | " << cell(kind(s)) << " | " << cell(shown_default(s))
                  << " | " << cell(s.description) << " |\n";
    }
}

void usage() {
    std::cout << "usage: pmr-info [--all | --markdown]\n"
                 "  (none)      version, providers, this machine, every setting with its value and "
                 "source\n"
                 "  --all       the same with the description of every setting\n"
                 "  --markdown  the settings as Markdown (docs/settings.md)\n";
}

} // namespace

int main(int argc, char** argv) {
    bool all = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--all" || arg == "-a") {
            all = true;
        } else if (arg == "--markdown") {
            print_markdown();
            return 0;
        } else if (arg == "--help" || arg == "-h") {
            usage();
            return 0;
        } else {
            std::cerr << "pmr-info: unknown argument '" << arg << "'\n";
            usage();
            return 2;
        }
    }
    try {
        std::cout << "pmr " << PMR_VERSION_STRING << "\n";
        std::vector<std::string> compiled;
        for (pmr::Provider p : pmr::compiled_providers()) {
            compiled.emplace_back(pmr::to_string(p));
        }
        std::cout << "  providers compiled: " << join(compiled) << "\n";
        print_machine();
        return print_settings(all);
    } catch (const std::exception& e) {
        std::cerr << "pmr-info: " << e.what() << "\n";
        return 1;
    }
}
