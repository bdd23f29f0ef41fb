// SPDX-License-Identifier: MIT
// The machine under every collective: a schedule of steps, each a few sends and receives of byte
// ranges of a work buffer, run on pmr connections and windows only.
//
// Every rank derives its schedule from the same global plan, and creates its windows in the order
// of its steps. That order is what pairs them: the k-th send of rank a to rank b in the plan is the
// k-th SendWindow on a's connection to b and the k-th RecvWindow on b's connection to a.
//
// A run: start() grants every receive window of every step at once (init + post; staged receive
// windows were already granted for it when the last run consumed their data), then posts the
// sends of step 0. A step ends when its receives have arrived: they are applied to the work buffer
// (copied, or reduced with the received data as the lower or upper operand), and the next step's
// sends are posted from the work buffer as it is then. Sends are staged in their own windows, so
// the work buffer may change while they are in flight; the run ends when every step has ended and
// every send has completed. Sends and receives marked in place skip the staging: their windows lie
// over the work buffer (the plan then says why no step overwrites a range in flight).
#pragma once

#include <pmr/communicator.hpp>
#include <pmr/window.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace pmr::detail::coll {

/// What to do with a received byte range.
enum class Action : unsigned char {
    copy,         ///< work[offset...] = received
    reduce_lower, ///< work = op(received, work): the received data stands for lower ranks
    reduce_upper, ///< work = op(work, received)
    keep,         ///< nothing: the step's finish callback reads it
};

/// No lane: the send goes out with a plain post() (the provider's rail 0).
constexpr int any_lane = -1;

struct Send {
    int peer = 0;
    std::size_t offset = 0; ///< bytes into the work buffer
    std::size_t bytes = 0;
    /// Lane l >= 0 puts the whole message on one rail: the l-th of the connection's rails in the
    /// order of their device names (rail index order where the provider names none), so that sends
    /// of different lanes leave a process over different devices.
    int lane = any_lane;
    /// The send window lies over the work buffer itself (no staging copy at post). The plan must
    /// then guarantee that no later step writes [offset, offset + bytes) before this send has
    /// been delivered (or mark that step `after_sends`).
    bool in_place = false;
};

struct Recv {
    int peer = 0;
    std::size_t offset = 0;
    std::size_t bytes = 0;
    Action action = Action::copy;
    /// The receive window lies over the work buffer itself (action must be copy: the data lands
    /// in place). The receiver grants it at start(), so the plan must guarantee that the sender
    /// posts only once this rank no longer reads or writes that range in the run (for example
    /// because the sender waits for data this rank sends after its last use of the range).
    bool in_place = false;
};

struct Step {
    std::vector<Send> sends;
    std::vector<Recv> recvs;
    /// Whether the finish callback runs after the receives of this step have been applied.
    bool finish = false;
    /// Whether every send posted so far must have completed (been delivered) before the
    /// receives of this step are applied and its finish callback runs: for plans whose finish
    /// callback overwrites ranges that in-place sends read.
    bool after_sends = false;
};

/// Reduces `count` elements: acc = op(in, acc) if `in_is_lower`, else op(acc, in).
using Reducer = void (*)(void* acc, const void* in, std::size_t count, bool in_is_lower);

/// Called at the end of a step with `finish` set, with the data of the step's receives in order.
using Finish = std::function<void(const std::vector<const std::byte*>& received)>;

/// Connections of one collective object by peer rank, shared by its engines.
using Connections = std::map<int, Connection>;

/// Creates the connections to the peers of `steps` that `connections` lacks, in the order of the
/// steps (sends before receives), the order every engine on these steps creates them in.
void connect_peers(const Communicator& comm, Connections& connections,
                   const std::vector<Step>& steps);

/// The rail of `connection` that lane `lane` uses (see Send::lane); completes the handshake.
std::size_t rail_of_lane(Connection& connection, int lane);

/// Whether an engine runs once on scratch memory at construction (see Engine::Engine).
enum class WarmUp : bool { no, yes };

class Engine {
public:
    /// Creates one library connection per peer of `steps` and one window per transfer, and runs
    /// once on scratch memory to complete their set-up (collective: every rank of `comm` must
    /// construct its engine). Windows of in-place sends and receives lie over `work` (which must
    /// then be the work buffer of every run, and outlive the engine); the set-up run moves no
    /// data through them (it posts 0 bytes), so that it leaves `work` alone.
    /// Connections to peers missing from `connections` are created there, in the order of the
    /// steps; `connections` must outlive the engine.
    /// WarmUp::no leaves out the scratch run, for an engine whose first real run follows at once
    /// and is waited for before the engine is destroyed (that run completes the set-up instead).
    Engine(const Communicator& comm, Connections& connections, std::vector<Step> steps,
           std::size_t element_size, Reducer reducer, std::string what, std::byte* work = nullptr,
           WarmUp warm = WarmUp::yes);

    /// The work buffer of the next runs. @throws UsageError if the engine has in-place windows
    /// over another buffer.
    void set_work(std::byte* work);
    void set_finish(Finish finish) { finish_ = std::move(finish); }

    /// Grants all receives and posts the first step. @throws UsageError while active.
    void start();
    /// Progresses; true once this rank's part has completed.
    bool test();
    /// test() until true, yielding the core as every wait of pmr does.
    void wait();
    bool active() const noexcept { return active_; }
    const std::string& what() const noexcept { return what_; }

private:
    void warm_up();
    void begin_step(std::size_t index);
    bool sends_complete();
    void end_step(std::size_t index);
    void grant_next_run(std::size_t index);

    struct StepWindows {
        std::vector<SendWindow<std::byte>> sends;
        std::vector<std::size_t> rails; ///< per send: its rail, or no_rail for a plain post
        std::vector<RecvWindow<std::byte>> recvs;
        /// Per receive: the run in which it arrived (runs count from 1; nothing to reset).
        std::vector<std::uint64_t> received;
        /// Per receive: the run it was granted for (init and post) at the end of the one before.
        std::vector<std::uint64_t> granted;
    };

    std::vector<Step> steps_;
    std::size_t element_size_;
    Reducer reducer_;
    std::string what_;
    Connections& connections_;
    std::vector<StepWindows> windows_;
    std::vector<SendWindow<std::byte>*> pending_sends_;
    std::vector<const std::byte*> received_;
    Finish finish_;
    std::byte* work_ = nullptr;
    std::byte* bound_ = nullptr; ///< the buffer in-place windows lie over
    std::size_t step_ = 0;
    std::uint64_t run_ = 0; ///< the run in flight or last completed
    bool active_ = false;
    bool warming_up_ = false;
};

} // namespace pmr::detail::coll
