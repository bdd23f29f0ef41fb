// SPDX-License-Identifier: MIT
/// @file pmr.hpp
/// Everything of pmr: persistent connections and windows for halo exchange beside MPI.
#pragma once

#include <pmr/collectives.hpp>
#include <pmr/communicator.hpp>
#include <pmr/config.hpp>
#include <pmr/connection.hpp>
#include <pmr/error.hpp>
#include <pmr/memory.hpp>
#include <pmr/neighbor.hpp>
#include <pmr/provider.hpp>
#include <pmr/target.hpp>
#include <pmr/tofu.hpp>
#include <pmr/window.hpp>
