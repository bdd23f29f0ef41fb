// SPDX-License-Identifier: MIT
// The registry of settings (pmr/settings.hpp): one parser per type, the fallback of a provider's
// own variables, declarations of add-on layers, and messages that name the variable.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <pmr/settings.hpp>

#include <string>

using pmr_test::message_of;
using pmr_test::ScopedEnvironment;
namespace settings = pmr::settings;

TEST_CASE("every setting is declared once, with a description and a PMR_ name", "[settings]") {
    const auto all = settings::all();
    CHECK(all.size() >= 45);
    for (std::size_t i = 0; i < all.size(); ++i) {
        INFO(all[i].name);
        CHECK(all[i].name.rfind("PMR_", 0) == 0);
        CHECK_FALSE(all[i].description.empty());
        CHECK_FALSE(all[i].group.empty());
        for (std::size_t j = 0; j < i; ++j) {
            CHECK(all[j].name != all[i].name);
        }
        if (all[i].type == settings::Type::choice) {
            CHECK_FALSE(all[i].choices.empty());
        }
        if (!all[i].default_value.empty()) {
            ScopedEnvironment env;
            env.set(all[i].name.c_str(), nullptr);
            CHECK_NOTHROW(settings::validate(all[i].name)); // every default parses
        }
    }
    CHECK_THROWS_AS(settings::find("PMR_NO_SUCH_THING"), pmr::UsageError);
}

TEST_CASE("sizes take K, M and G everywhere", "[settings]") {
    ScopedEnvironment env;
    env.set("PMR_SHM_CHUNK", nullptr);
    CHECK(settings::size("PMR_SHM_CHUNK") == std::size_t{1} << 20); // the default, 1M
    CHECK(settings::value("PMR_SHM_CHUNK").source == settings::Source::default_value);
    env.set("PMR_SHM_CHUNK", "64k");
    CHECK(settings::size("PMR_SHM_CHUNK") == std::size_t{64} << 10);
    CHECK(settings::value("PMR_SHM_CHUNK").source == settings::Source::environment);
    env.set("PMR_SHM_CHUNK", "2G");
    CHECK(settings::size("PMR_SHM_CHUNK") == std::size_t{2} << 30);
    env.set("PMR_SHM_CHUNK", "4096");
    CHECK(settings::size("PMR_SHM_CHUNK") == 4096U);
    for (const char* bad : {"-1", "12Q", "64KiB", "1.5M", " 4", "x"}) {
        env.set("PMR_SHM_CHUNK", bad);
        const std::string what =
            message_of<pmr::ArgumentError>([] { (void)settings::size("PMR_SHM_CHUNK"); });
        CHECK(what.find(std::string("PMR_SHM_CHUNK='") + bad + "'") != std::string::npos);
        CHECK(what.find("size in bytes") != std::string::npos);
    }
    env.set("PMR_SHM_CHUNK", "");
    CHECK(settings::value("PMR_SHM_CHUNK").source == settings::Source::default_value);
}

TEST_CASE("flags, durations, integers and choices have one parser each", "[settings]") {
    ScopedEnvironment env;
    for (const char* yes : {"1", "yes", "on", "true", "ON"}) {
        env.set("PMR_DEBUG", yes);
        CHECK(settings::flag("PMR_DEBUG") == true);
    }
    for (const char* no : {"0", "no", "off", "false"}) {
        env.set("PMR_DEBUG", no);
        CHECK(settings::flag("PMR_DEBUG") == false);
    }
    env.set("PMR_DEBUG", "2");
    CHECK(message_of<pmr::ArgumentError>([] {
              (void)settings::flag("PMR_DEBUG");
          }).find("PMR_DEBUG='2' is not a yes/no setting") != std::string::npos);

    env.set("PMR_WARN_AFTER", "2.5");
    CHECK(settings::duration("PMR_WARN_AFTER") == Approx(2.5));
    env.set("PMR_WARN_AFTER", "250ms");
    CHECK(settings::duration("PMR_WARN_AFTER") == Approx(0.25));
    env.set("PMR_SPIN_US", "50"); // the unit of PMR_SPIN_US is us
    CHECK(settings::duration("PMR_SPIN_US") == Approx(50e-6));
    env.set("PMR_SPIN_US", "1ms");
    CHECK(settings::duration("PMR_SPIN_US") == Approx(1e-3));
    for (const char* bad : {"-1", "5 minutes", "x", "1h"}) {
        env.set("PMR_WARN_AFTER", bad);
        CHECK_THROWS_AS(settings::duration("PMR_WARN_AFTER"), pmr::ArgumentError);
    }

    env.set("PMR_TOFU_QUEUE_DEPTH", "8");
    CHECK(settings::integer("PMR_TOFU_QUEUE_DEPTH") == 8);
    env.set("PMR_TOFU_QUEUE_DEPTH", "0");
    CHECK(message_of<pmr::ArgumentError>([] {
              (void)settings::integer("PMR_TOFU_QUEUE_DEPTH");
          }).find("is not from 1 to 65536") != std::string::npos);
    env.set("PMR_TOFU_QUEUE_DEPTH", "8x");
    CHECK_THROWS_AS(settings::integer("PMR_TOFU_QUEUE_DEPTH"), pmr::ArgumentError);

    env.set("PMR_ALLREDUCE_ALGORITHM", "rd"); // an alias gives the canonical spelling
    CHECK(settings::choice("PMR_ALLREDUCE_ALGORITHM") == "recursive_doubling");
    env.set("PMR_ALLREDUCE_ALGORITHM", "bogus");
    const std::string what =
        message_of<pmr::ArgumentError>([] { (void)settings::choice("PMR_ALLREDUCE_ALGORITHM"); });
    CHECK(what.find("PMR_ALLREDUCE_ALGORITHM='bogus'") != std::string::npos);
    CHECK(what.find("recursive_doubling (rd)") != std::string::npos);

    // Reading a setting as another type is a programming error.
    CHECK_THROWS_AS(settings::size("PMR_DEBUG"), pmr::UsageError);
}

TEST_CASE("a provider's own variable falls back to the generic one", "[settings]") {
    ScopedEnvironment env;
    env.set("PMR_UCX_RAILS", nullptr);
    env.set("PMR_RAILS", nullptr);
    CHECK(settings::value("PMR_UCX_RAILS").source == settings::Source::none);
    CHECK_FALSE(settings::integer("PMR_UCX_RAILS"));
    env.set("PMR_RAILS", "3");
    CHECK(settings::integer("PMR_UCX_RAILS") == 3);
    CHECK(settings::value("PMR_UCX_RAILS").variable == "PMR_RAILS");
    env.set("PMR_UCX_RAILS", "2");
    CHECK(settings::integer("PMR_UCX_RAILS") == 2);
    CHECK(settings::value("PMR_UCX_RAILS").variable == "PMR_UCX_RAILS");
    env.set("PMR_UCX_RAILS", nullptr);
    env.set("PMR_RAILS", "99");
    CHECK(message_of<pmr::ArgumentError>([] {
              (void)settings::integer("PMR_UCX_RAILS");
          }).find("PMR_RAILS='99'") != std::string::npos); // names the variable that was set
}

TEST_CASE("layers on pmr declare their own settings", "[settings]") {
    settings::Setting s;
    s.name = "PMR_TEST_ADDON_BYTES";
    s.type = settings::Type::size;
    s.unit = "B";
    s.default_value = "4K";
    s.group = "test";
    s.description = "A setting of a layer built on pmr.";
    settings::declare(s);
    settings::declare(s); // again: allowed, the first stays
    ScopedEnvironment env;
    env.set("PMR_TEST_ADDON_BYTES", nullptr);
    CHECK(settings::size("PMR_TEST_ADDON_BYTES") == 4096U);
    env.set("PMR_TEST_ADDON_BYTES", "1M");
    CHECK(settings::size("PMR_TEST_ADDON_BYTES") == std::size_t{1} << 20);
    CHECK(settings::all().back().name == "PMR_TEST_ADDON_BYTES");

    settings::Setting clash = s;
    clash.type = settings::Type::flag;
    CHECK_THROWS_AS(settings::declare(clash), pmr::UsageError);
    settings::Setting unprefixed = s;
    unprefixed.name = "MY_BYTES";
    CHECK_THROWS_AS(settings::declare(unprefixed), pmr::UsageError);
}

TEST_CASE("a value in code wins, else the environment, else the default", "[settings]") {
    ScopedEnvironment env;
    const auto read = [](std::string_view name) { return settings::size(name); };
    env.set("PMR_NEIGHBOR_CROSSOVER", nullptr);
    CHECK(settings::resolve<std::size_t>(std::nullopt, "PMR_NEIGHBOR_CROSSOVER", read, 7) == 7);
    env.set("PMR_NEIGHBOR_CROSSOVER", "2K");
    CHECK(settings::resolve<std::size_t>(std::nullopt, "PMR_NEIGHBOR_CROSSOVER", read, 7) == 2048);
    CHECK(settings::resolve<std::size_t>(std::size_t{100}, "PMR_NEIGHBOR_CROSSOVER", read, 7) ==
          100);
}
