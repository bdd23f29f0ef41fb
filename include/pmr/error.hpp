// SPDX-License-Identifier: MIT
/// @file error.hpp
/// Exceptions thrown by pmr. Every failure is reported as a type derived from pmr::Error whose
/// message says what went wrong, where (rank, peer, window, provider) and what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace pmr {

/// Base of every exception pmr throws.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Calls in the wrong order, e.g. `post()` before `init()` or `wait()` before `post()`.
class UsageError : public Error {
public:
    using Error::Error;
};

/// Invalid arguments: out-of-range ranks, negative tags, null buffers, unknown provider names.
class ArgumentError : public Error {
public:
    using Error::Error;
};

/// Sizes that do not fit: a send larger than the window or than the peer's receive window.
class SizeError : public Error {
public:
    using Error::Error;
};

/// A native call of a provider (shared memory, UCX, ...) failed.
class ProviderError : public Error {
public:
    using Error::Error;
};

/// A limit of the system or of pmr was reached (open files, memory mappings, shared memory, the
/// arena's PMR_ARENA_LIMIT): the message names the limit and how to raise it. A ProviderError, so
/// code that catches those catches this too.
class ResourceError : public ProviderError {
public:
    using ProviderError::ProviderError;
};

/// MPI failed while connections or windows were being set up.
class BootstrapError : public Error {
public:
    using Error::Error;
};

/// A wait exceeded the deadline set with the environment variable `PMR_TIMEOUT` (seconds).
class Timeout : public Error {
public:
    using Error::Error;
};

/// The peer process died, or destroyed the matching window, while we depended on it.
class PeerLost : public Error {
public:
    using Error::Error;
};

} // namespace pmr
