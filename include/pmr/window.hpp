// SPDX-License-Identifier: MIT
/// @file window.hpp
/// Persistent send and receive windows: a buffer registered once, transferred many times.
///
/// One transfer runs through the same three calls on both sides:
///
///     recv.init();  send.init();     // receiver: "my buffer may be written"; sender: "new round"
///     send.post();  recv.post();     // sender: start the transfer; receiver: expect it
///     send.wait();  recv.wait();     // sender: buffer reusable; receiver: data arrived
///
/// - Between `recv.init()` and the end of `recv.wait()` the receive buffer belongs to pmr: do not
///   read or write it. Before `init()` and after `wait()` it is yours.
/// - Between `send.post()` and the end of `send.wait()` the send buffer must not be written.
/// - `send.post()` never blocks: it does not wait for the receiver's `init()`. If the receiver has
///   not granted its buffer yet, the transfer happens during a later `test()` or `wait()` of the
///   sender. `recv.post()` only marks the transfer as expected; it moves no data.
/// - `test()` is a non-blocking `wait()`: it returns true once the operation has completed, after
///   which the window is back in its initial state. pmr::wait_all() and pmr::test_all() do the same
///   for several windows at once.
/// - Calls out of this order throw UsageError. A window may be destroyed in any state; the peer's
///   pending operation then fails with PeerLost instead of hanging.
///
/// Pairing: the k-th SendWindow created on a connection pairs with the k-th RecvWindow created on
/// the peer's matching connection. The send window may be smaller than the receive window (the
/// receiver learns the size from received_bytes()), never larger. Both must hold elements of the
/// same size unless one of them is a byte window (elements of 1 byte), which pairs with anything.
///
/// Units: a typed window counts elements everywhere, as its constructor does:
/// `send.post(pmr::Elements{n})` sends the first n elements (n * sizeof(T) bytes). Only names that
/// say so count bytes (bytes(), received_bytes(), RailRange and the C API).
///
/// Multi-rail: a connection may have several rails (independent network paths,
/// Connection::rails()). `send.post({pmr::RailSlice{0, a, 0}, pmr::RailSlice{a, b, 1}})` sends the
/// first a + b elements, the first a over rail 0 and the next b over rail 1; the receiver sees one
/// transfer of a + b elements. See SendWindow::post(slices).
///
/// A default-constructed window is empty: it can be assigned to, and every other use throws
/// UsageError. Windows hold their connection alive. Threading: see Connection.
#pragma once

#include <pmr/connection.hpp>
#include <pmr/error.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace pmr {

/// A number of elements of a typed window (not bytes): `send.post(pmr::Elements{n})` transfers
/// the first n elements. The constructor is explicit so that a byte count cannot slip in.
struct Elements {
    constexpr explicit Elements(std::size_t n) noexcept : count(n) {}
    std::size_t count;
};

/// A piece of a multi-rail post of a typed window, in elements: `count` elements from element
/// `first` on, carried over rail `rail` of the connection (0 <= rail < Connection::rails()). See
/// SendWindow::post(slices).
struct RailSlice {
    std::size_t first = 0;
    std::size_t count = 0;
    std::size_t rail = 0;
};

/// The byte form of RailSlice: `bytes` bytes from byte `offset` on, over rail `rail`. What the C
/// API and the providers speak; typed windows take RailSlice (the RailRange overloads of
/// SendWindow::post are deprecated).
struct RailRange {
    std::size_t offset = 0;
    std::size_t bytes = 0;
    std::size_t rail = 0;
};

namespace detail {

enum class Side : unsigned char { send, recv };

template <Side S>
struct WindowState;

/// The untyped window of one side: its state lives in the library (window.cpp).
template <Side S>
class WindowCore {
public:
    WindowCore() noexcept;
    /// Window over a user buffer of `bytes` bytes.
    WindowCore(const Connection& connection, void* buffer, std::size_t bytes,
               std::size_t element_size);
    /// Window over `bytes` bytes of library-owned memory (see memory.hpp).
    WindowCore(const Connection& connection, std::size_t bytes, std::size_t element_size);
    WindowCore(const WindowCore&) = delete;
    WindowCore& operator=(const WindowCore&) = delete;
    WindowCore(WindowCore&& other) noexcept;
    WindowCore& operator=(WindowCore&& other) noexcept;
    ~WindowCore();

    void init();
    void post(std::size_t bytes);
    void post(const RailRange* ranges, std::size_t count);
    void post(const RailSlice* slices, std::size_t count);
    /// Raises the error of a post of `count` elements that do not fit this window (UsageError
    /// first if the window is empty or not initialised, as post() would).
    [[noreturn]] void element_count_error(std::size_t count) const;
    void wait();
    void wait(double timeout_seconds);
    bool test();

    std::byte* data() const noexcept { return data_; }
    std::size_t bytes() const noexcept { return bytes_; }
    bool owns_memory() const noexcept;
    /// Whether the window is posted and has not completed since (no wait() or test() has
    /// returned its completion, also not inside a wait_all() that threw afterwards).
    bool posted() const noexcept;
    std::size_t received_bytes() const;
    std::string describe() const;
    WindowState<S>* state() const noexcept { return state_.get(); }

private:
    WindowState<S>& checked() const;

    std::unique_ptr<WindowState<S>> state_;
    std::byte* data_ = nullptr;
    std::size_t bytes_ = 0;
};

extern template class WindowCore<Side::send>;
extern template class WindowCore<Side::recv>;

std::size_t checked_bytes(std::size_t count, std::size_t element_size);

/// One window of a wait_all()/test_all() call: exactly one of the two is set.
struct Waitable {
    WindowCore<Side::send>* send = nullptr;
    WindowCore<Side::recv>* recv = nullptr;
};

void wait_all(const Waitable* windows, std::size_t count);
/// wait_all() with its own limit instead of PMR_TIMEOUT's. @throws ArgumentError unless > 0.
void wait_all(const Waitable* windows, std::size_t count, double timeout_seconds);
bool test_all(const Waitable* windows, std::size_t count);

template <class T, Side S>
class TypedWindow {
    static_assert(std::is_trivially_copyable_v<T>,
                  "pmr windows move raw bytes: the element type must be trivially copyable");

public:
    using value_type = T;
    using iterator = T*;
    using const_iterator = const T*;
    using size_type = std::size_t;

    /// An empty window, to be assigned to.
    TypedWindow() noexcept = default;
    /// Window over the user buffer [buffer, buffer + count). The buffer must outlive the window.
    /// @throws ArgumentError for a null buffer with count > 0, SizeError for an absurd count,
    ///         UsageError for an empty connection, ResourceError where a limit is reached (as the
    ///         next constructor).
    TypedWindow(const Connection& connection, T* buffer, std::size_t count)
        : core_(connection, buffer, checked_bytes(count, sizeof(T)), sizeof(T)) {}
    /// Window over `count` elements of library-owned, zero-filled memory.
    /// @throws ResourceError where a limit is reached (open files, mappings, PMR_ARENA_LIMIT): the
    ///         window still takes its place in the pairing and withdraws it, so that the peer's
    ///         matching window fails at its first use with a ResourceError naming this rank's
    ///         limit and the later windows of both sides still pair; as the previous constructor.
    TypedWindow(const Connection& connection, std::size_t count)
        : core_(connection, checked_bytes(count, sizeof(T)), sizeof(T)) {}

    /// Whether this object holds a window (false when default-constructed or moved from).
    explicit operator bool() const noexcept { return core_.state() != nullptr; }

    /// Starts a round. Receiver: grants the sender the right to write the buffer.
    /// @throws UsageError if the previous round has not completed; Timeout, PeerLost, SizeError,
    ///         ProviderError when the first use completes the set-up; ResourceError if the peer's
    ///         matching window failed at a limit of the peer's (UsageError if the peer destroyed
    ///         it unused).
    void init() { core_.init(); }
    /// Sender: starts the transfer of the whole window; never blocks. Receiver: marks the transfer
    /// as expected. @throws UsageError if init() was not called.
    void post() { core_.post(core_.bytes()); }
    /// Wait for completion. @throws UsageError if post() was not called; Timeout once PMR_TIMEOUT
    ///         has passed without progress (if set); PeerLost.
    void wait() { core_.wait(); }
    /// wait() with this call's own deadline instead of PMR_TIMEOUT: e.g. `recv.wait(50ms)` throws
    /// Timeout, naming the window and its peer, once 50 ms have passed without completion. As for
    /// every setting, the value given in code wins over the environment. The set-up of a first
    /// use (in init()) keeps PMR_TIMEOUT. After a Timeout the transfer is still in flight: wait
    /// again to keep waiting.
    /// @throws ArgumentError for a timeout that is not positive; as wait().
    template <class Rep, class Period>
    void wait(std::chrono::duration<Rep, Period> timeout) {
        core_.wait(std::chrono::duration<double>(timeout).count());
    }
    /// Non-blocking wait(): true once complete. @throws as wait(); Timeout once PMR_TIMEOUT has
    /// passed without progress.
    bool test() { return core_.test(); }

    T* data() noexcept { return reinterpret_cast<T*>(core_.data()); }
    const T* data() const noexcept { return reinterpret_cast<const T*>(core_.data()); }
    std::size_t size() const noexcept { return core_.bytes() / sizeof(T); }
    std::size_t bytes() const noexcept { return core_.bytes(); }
    bool empty() const noexcept { return core_.bytes() == 0; }
    T& operator[](std::size_t i) noexcept { return data()[i]; }
    const T& operator[](std::size_t i) const noexcept { return data()[i]; }
    iterator begin() noexcept { return data(); }
    iterator end() noexcept { return data() + size(); }
    const_iterator begin() const noexcept { return data(); }
    const_iterator end() const noexcept { return data() + size(); }
    const_iterator cbegin() const noexcept { return data(); }
    const_iterator cend() const noexcept { return data() + size(); }

    /// Copies [first, last) into the window starting at element `offset`.
    /// @throws SizeError if the range does not fit.
    template <class InputIt>
    void insert(InputIt first, InputIt last, std::size_t offset = 0) {
        auto count = static_cast<std::size_t>(std::distance(first, last));
        if (offset > size() || count > size() - offset) {
            throw SizeError("pmr: insert of " + std::to_string(count) + " elements at offset " +
                            std::to_string(offset) + " does not fit " + core_.describe());
        }
        std::copy(first, last, data() + offset);
    }
    /// Copies the window to `out` and returns the end of the output.
    template <class OutputIt>
    OutputIt extract(OutputIt out) const {
        return std::copy(begin(), end(), out);
    }

    /// Whether the buffer is library-owned.
    bool owns_memory() const noexcept { return core_.owns_memory(); }
    /// "send window #0 (4096 B) on rank 0 -> peer 1 (...)", for messages.
    std::string describe() const { return core_.describe(); }

    /// @cond internal
    WindowCore<S>& core() noexcept { return core_; }
    /// @endcond

protected:
    WindowCore<S> core_; // NOLINT(misc-non-private-member-variables-in-classes)
};

template <class W>
Waitable waitable(W& window) {
    Waitable w;
    if constexpr (std::is_same_v<std::decay_t<decltype(window.core())>, WindowCore<Side::send>>) {
        w.send = &window.core();
    } else {
        w.recv = &window.core();
    }
    return w;
}

/// Calls `f(list, count)` with the Waitables of [first, last): on the stack for up to 64 windows,
/// so that the halo exchanges of real codes allocate nothing.
template <class Iterator, class F>
auto with_waitables(Iterator first, Iterator last, F&& f) {
    constexpr std::size_t on_stack = 64;
    const auto count = static_cast<std::size_t>(std::distance(first, last));
    std::array<Waitable, on_stack> small{};
    std::vector<Waitable> large(count > on_stack ? count : 0);
    Waitable* list = count > on_stack ? large.data() : small.data();
    for (std::size_t i = 0; first != last; ++first, ++i) {
        list[i] = waitable(*first);
    }
    return f(list, count);
}

} // namespace detail

/// Sending half of a persistent transfer. See the file comment for the state machine.
template <class T>
class SendWindow : public detail::TypedWindow<T, detail::Side::send> {
public:
    using detail::TypedWindow<T, detail::Side::send>::TypedWindow;
    using detail::TypedWindow<T, detail::Side::send>::post;

    /// Transfers only the first `n.count` elements of the window (n.count * sizeof(T) bytes).
    /// @throws SizeError if they exceed this window or the peer's receive window; UsageError as
    ///         post().
    void post(Elements n) {
        if (n.count > this->size()) {
            this->core_.element_count_error(n.count);
        }
        this->core_.post(n.count * sizeof(T));
    }

    /// Multi-rail post: transfers the first n elements like post(Elements{n}), slice by slice, each
    /// slice over its own rail, so that one message can use several network devices at once. The
    /// slices must tile [0, n) in order: the first starts at element 0, each next one where the
    /// previous ended; n is where the last one ends. Empty slices are allowed; no slices post 0
    /// elements. The receiver sees one transfer of n elements. With one rail (self, shm,
    /// single-rail ucx) every slice names rail 0 and the call equals post(Elements{n}).
    /// @throws ArgumentError if the slices do not tile a prefix of the window in order or name a
    ///         rail >= Connection::rails(); SizeError and UsageError as post(Elements).
    void post(const RailSlice* slices, std::size_t count) { this->core_.post(slices, count); }
    /// Same, e.g. `send.post({pmr::RailSlice{0, half, 0}, pmr::RailSlice{half, rest, 1}})`.
    void post(std::initializer_list<RailSlice> slices) { post(slices.begin(), slices.size()); }

    /// Deprecated in pmr 0.1, removed in the next release: the byte spelling of post(Elements).
    [[deprecated("post(std::size_t) counts bytes; write post(pmr::Elements{count}) to send the "
                 "first count elements")]] void
    post(std::size_t bytes) {
        this->core_.post(bytes);
    }
    /// Deprecated in pmr 0.1, removed in the next release: the byte spelling of post(slices).
    [[deprecated("post(const RailRange*, n) counts bytes; post pmr::RailSlice pieces, which "
                 "count elements")]] void
    post(const RailRange* ranges, std::size_t count) {
        this->core_.post(ranges, count);
    }
    /// Same. A braced list of plain numbers, `post({{0, a, 0}})`, is ambiguous between the two
    /// units and does not compile: name the type, pmr::RailSlice.
    [[deprecated("post({RailRange...}) counts bytes; post pmr::RailSlice pieces, which count "
                 "elements")]] void
    post(std::initializer_list<RailRange> ranges) {
        this->core_.post(ranges.begin(), ranges.size());
    }
};

/// Receiving half of a persistent transfer. See the file comment for the state machine.
template <class T>
class RecvWindow : public detail::TypedWindow<T, detail::Side::recv> {
public:
    using detail::TypedWindow<T, detail::Side::recv>::TypedWindow;

    /// Bytes delivered by the last completed transfer.
    /// @throws UsageError before the first transfer completed.
    std::size_t received_bytes() const { return this->core_.received_bytes(); }
    /// Whole elements delivered by the last completed transfer.
    std::size_t received_count() const { return received_bytes() / sizeof(T); }
};

/// Waits until the posted operations of all `windows` (send and receive windows of any element
/// type) have completed, with one backoff and one PMR_TIMEOUT deadline for all of them; each
/// window is then back in its initial state, as after its own wait(). Every window must be
/// posted. On an exception the windows that completed are idle and the others still posted.
/// @throws UsageError if a window is not posted or empty; Timeout, PeerLost as wait().
template <class... Windows>
void wait_all(Windows&... windows) {
    const detail::Waitable list[] = {detail::waitable(windows)...};
    detail::wait_all(list, sizeof...(Windows));
}

/// wait_all() over a range of windows of one type, e.g. a std::vector<pmr::RecvWindow<double>>.
template <class Iterator>
void wait_all(Iterator first, Iterator last) {
    detail::with_waitables(first, last, [](const detail::Waitable* list, std::size_t count) {
        detail::wait_all(list, count);
        return true;
    });
}

/// wait_all() with a time limit of its own instead of PMR_TIMEOUT, e.g.
/// `pmr::wait_all(std::chrono::seconds(5), send, recv)`; as wait(timeout) for one window.
/// @throws Timeout after `timeout` (naming the first incomplete window); ArgumentError if
/// `timeout` is not positive; as wait_all() otherwise.
template <class Rep, class Period, class... Windows>
void wait_all(std::chrono::duration<Rep, Period> timeout, Windows&... windows) {
    const detail::Waitable list[] = {detail::waitable(windows)...};
    detail::wait_all(list, sizeof...(Windows), std::chrono::duration<double>(timeout).count());
}

/// wait_all(first, last) with a time limit of its own instead of PMR_TIMEOUT.
template <class Iterator, class Rep, class Period>
void wait_all(Iterator first, Iterator last, std::chrono::duration<Rep, Period> timeout) {
    const double seconds = std::chrono::duration<double>(timeout).count();
    detail::with_waitables(first, last, [seconds](const detail::Waitable* list, std::size_t count) {
        detail::wait_all(list, count, seconds);
        return true;
    });
}

/// Non-blocking wait_all(): true once every window's operation has completed, and then all of
/// them are back in their initial state; false leaves every window posted (none is completed on
/// its own). @throws as wait_all(); Timeout once PMR_TIMEOUT has passed without completion.
template <class... Windows>
bool test_all(Windows&... windows) {
    const detail::Waitable list[] = {detail::waitable(windows)...};
    return detail::test_all(list, sizeof...(Windows));
}

/// test_all() over a range of windows of one type.
template <class Iterator>
bool test_all(Iterator first, Iterator last) {
    return detail::with_waitables(first, last, [](const detail::Waitable* list, std::size_t count) {
        return detail::test_all(list, count);
    });
}

} // namespace pmr
