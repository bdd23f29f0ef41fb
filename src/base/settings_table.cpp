// SPDX-License-Identifier: MIT
// Every PMR_* environment variable of libpmr, declared once. docs/settings.md and the README's
// table are generated from this list (pmr-info --markdown; the test settings_docs checks that the
// committed copies match it).
#include "base/settings_table.hpp"

#include <utility>

namespace pmr::detail {
namespace {

using settings::Setting;
using settings::Type;

struct Builder {
    Setting s;
    Builder(const char* name, Type type, const char* group, const char* description) {
        s.name = name;
        s.type = type;
        s.group = group;
        s.description = description;
    }
    Builder& unit(const char* u) {
        s.unit = u;
        return *this;
    }
    Builder& by_default(const char* value) {
        s.default_value = value;
        return *this;
    }
    Builder& note(const char* text) {
        s.default_note = text;
        return *this;
    }
    Builder& choices(std::vector<std::string> list) {
        s.choices = std::move(list);
        return *this;
    }
    Builder& bounds(double low, double high) {
        s.min = low;
        s.max = high;
        return *this;
    }
    Builder& falls_back_to(const char* name) {
        s.falls_back_to = name;
        return *this;
    }
};

#ifdef NDEBUG
constexpr const char* checks_default = "0";
#else
constexpr const char* checks_default = "1";
#endif

} // namespace

std::vector<settings::Setting> builtin_settings() {
    std::vector<Builder> b;
    // PMR_<PROVIDER>_RAILS and _DEVICES: PMR_RAILS and PMR_DEVICES for one provider alone.
    const auto own_rails = [&b](const char* group, const char* rails, const char* devices) {
        b.push_back(Builder(rails, Type::integer, group, "PMR_RAILS for this provider alone.")
                        .bounds(1, 16)
                        .falls_back_to("PMR_RAILS"));
        b.push_back(Builder(devices, Type::text, group, "PMR_DEVICES for this provider alone.")
                        .falls_back_to("PMR_DEVICES"));
    };
    // core ----------------------------------------------------------------------------------------
    b.push_back(Builder("PMR_PROVIDER", Type::text, "core",
                        "Forces the provider of every inter-process connection (shm, ucx, verbs, "
                        "tofu). An unknown or uncompiled name is an error that lists what is "
                        "compiled in. `pmr::Connection(target, pmr::Provider::shm)` forces one "
                        "connection in code.")
                    .note("chosen per connection"));
    b.push_back(Builder("PMR_TIMEOUT", Type::duration, "core",
                        "Turns a wait that would never end (for a transfer or for the peer's "
                        "set-up) into `pmr::Timeout`, naming the peer and the window. 0: wait "
                        "forever. A window's `wait(timeout)` gives that wait its own (code wins).")
                    .unit("s")
                    .by_default("0"));
    b.push_back(Builder("PMR_SPIN_US", Type::duration, "core",
                        "How long a wait spins before it starts yielding the core. Unset, it "
                        "follows the ranks on the node: more ranks than CPUs, waits yield at once; "
                        "at most as many, waits spin until they complete; count unknown, the "
                        "budget is at most this default, halved after waits whose spin found "
                        "nothing and doubled after waits that completed while spinning. Set, the "
                        "budget is fixed whatever the count.")
                    .unit("us")
                    .by_default("20"));
    b.push_back(Builder("PMR_WARN_AFTER", Type::duration, "core",
                        "A set-up wait (for the peer's connection or window) that takes this long "
                        "prints one warning naming this side, the peer and what the peer has "
                        "created so far. 0: never.")
                    .unit("s")
                    .by_default("5"));
    b.push_back(Builder("PMR_CHECKS", Type::flag, "core",
                        "Enables the checks that cost a little on the data path: a window used by "
                        "two threads at once is a `UsageError`.")
                    .by_default(checks_default)
                    .note("1 in builds without NDEBUG, else 0"));
    b.push_back(Builder("PMR_LAUNCHER_HINTS", Type::flag, "core",
                        "0 ignores what the MPI launcher says about the job running on one node "
                        "(then the first connection to each peer decides its provider at its "
                        "handshake).")
                    .by_default("1"));
    b.push_back(Builder("PMR_DEBUG", Type::flag, "core",
                        "Logs set-up decisions to stderr: the provider per connection and the copy "
                        "path per window.")
                    .by_default("0"));
    // memory --------------------------------------------------------------------------------------
    b.push_back(Builder("PMR_ARENA_STEP", Type::size, "memory",
                        "The size of the memory files the process's shared-memory arena grows by; "
                        "blocks larger than a quarter of it get a memory file of their own.")
                    .unit("B")
                    .by_default("64M"));
    b.push_back(Builder("PMR_ARENA_LIMIT", Type::size, "memory",
                        "The most shared memory (arena and own files) this process takes for "
                        "windows and `pmr::allocate`. 0: no limit but the system's.")
                    .unit("B")
                    .by_default("0"));
    b.push_back(Builder("PMR_STREAM_THRESHOLD", Type::size, "memory",
                        "The size from which copies into another process's memory use streaming "
                        "stores, which skip reading the destination lines first but leave the data "
                        "in memory rather than in a cache. 0: never. Worth it only where the "
                        "receiver does not read the halo soon.")
                    .unit("B")
                    .by_default("0"));
    // shm -----------------------------------------------------------------------------------------
    b.push_back(Builder("PMR_SHM_CMA", Type::flag, "shm",
                        "0 disables cross-memory attach: user buffers are reached through a "
                        "staging copy.")
                    .by_default("1"));
    b.push_back(Builder("PMR_SHM_CMA_THRESHOLD", Type::size, "shm",
                        "The size from which user buffers are written by cross-memory attach "
                        "(below it, through staging).")
                    .unit("B")
                    .by_default("8K"));
    b.push_back(Builder("PMR_SHM_CHUNK", Type::size, "shm",
                        "Rounds into a user buffer of at least twice this size are cut into chunks "
                        "of at least this size that the waiting receiver copies too. 0: the sender "
                        "copies alone.")
                    .unit("B")
                    .by_default("1M"));
    // rails ---------------------------------------------------------------------------------------
    b.push_back(Builder("PMR_RAILS", Type::integer, "rails",
                        "Rails per connection of the providers that have them (ucx, verbs, tofu), "
                        "on devices of the provider's choosing.")
                    .bounds(1, 16)
                    .note("1; tofu: one per TNI"));
    b.push_back(Builder("PMR_DEVICES", Type::text, "rails",
                        "One rail per device, comma-separated, named as the provider knows them "
                        "(`eth0`, `mlx5_0:1`, `tni2`).")
                    .note("the provider's choice"));
    // ucx -----------------------------------------------------------------------------------------
    own_rails("ucx", "PMR_UCX_RAILS", "PMR_UCX_DEVICES");
    b.push_back(Builder("PMR_UCX_PATH", Type::choice, "ucx",
                        "UCX's data path: puts where UCX has native RMA, one message per round "
                        "with the data where it emulates RMA (TCP); auto decides per connection.")
                    .choices({"auto", "put", "message"})
                    .by_default("auto"));
    b.push_back(Builder("PMR_UCX_SIGNAL", Type::choice, "ucx",
                        "How the put path signals a round that carried a payload: put (the "
                        "sequence word after a fence), am (an active message on the payload's "
                        "lane); auto: am to peers on this node, put otherwise.")
                    .choices({"auto", "put", "am"})
                    .by_default("auto"));
    b.push_back(Builder("PMR_UCX_PEER_ERRORS", Type::choice, "ucx",
                        "UCX's peer error handling for endpoints; auto: only to peers on other "
                        "nodes (on one node UCX then gives up its shared-memory transports).")
                    .choices({"auto", "on|1", "off|0"})
                    .by_default("auto"));
    b.push_back(Builder("PMR_UCX_RKEY_PTR", Type::flag, "ucx",
                        "0 disables the load/store path through ucp_rkey_ptr (puts everywhere).")
                    .by_default("1"));
    b.push_back(Builder("PMR_UCX_LANES", Type::choice, "ucx",
                        "Where a connection's messages travel over UCX's TCP transport, windows "
                        "from PMR_UCX_LANE_BYTES on send every message through pmr's own TCP "
                        "connection to the peer (one per rail), read straight into the receive "
                        "window; off leaves everything to UCX.")
                    .choices({"auto|on|1", "off|0"})
                    .by_default("auto"));
    b.push_back(Builder("PMR_UCX_LANE_BYTES", Type::size, "ucx",
                        "The smallest receive window whose messages take the TCP lanes (0 counts "
                        "as 1: every window with data).")
                    .unit("B")
                    .by_default("64K"));
    b.push_back(Builder("PMR_UCX_RNDV_BYTES", Type::size, "ucx",
                        "Message path, windows not on TCP lanes: pieces from this size on go by "
                        "UCX's rendezvous, straight from the send buffer into the receive buffer. "
                        "0: every piece eagerly.")
                    .unit("B")
                    .note("none where every rank has a CPU, 512K where ranks outnumber CPUs"));
    b.push_back(Builder("PMR_UCX_CHUNK_BYTES", Type::size, "ucx",
                        "Message path, windows not on TCP lanes: an eager piece larger than this "
                        "goes as several messages of at most this size (0: one message per piece, "
                        "else at least 1K; with a larger UCX_TCP_RX_SEG_SIZE, give that less "
                        "256).")
                    .unit("B")
                    .by_default("65280"));
    // verbs ---------------------------------------------------------------------------------------
    own_rails("verbs", "PMR_VERBS_RAILS", "PMR_VERBS_DEVICES");
    b.push_back(Builder("PMR_VERBS_GID_INDEX", Type::integer, "verbs",
                        "For RoCE, the GID table entry (the index `show_gids` lists for the "
                        "interface).")
                    .bounds(0, 255)
                    .note("the first RoCE v2 entry"));
    // tofu ----------------------------------------------------------------------------------------
    own_rails("tofu", "PMR_TOFU_RAILS", "PMR_TOFU_DEVICES");
    b.push_back(Builder("PMR_TOFU_MODEL", Type::choice, "tofu",
                        "The timing model of the emulated Tofu: off (no delays), k (the K "
                        "computer), fugaku (Tofu-D).")
                    .choices({"fugaku", "k", "off"})
                    .by_default("fugaku"));
    b.push_back(Builder("PMR_TOFU_TNIS", Type::integer, "tofu",
                        "Tofu network interfaces per emulated node.")
                    .bounds(1, 16)
                    .note("the model's: 4 (k, off), 6 (fugaku)"));
    b.push_back(Builder("PMR_TOFU_LINK_GBS", Type::number, "tofu",
                        "Bandwidth of one link in the timing model (positive).")
                    .unit("GB/s")
                    .note("the model's"));
    b.push_back(Builder("PMR_TOFU_INJECTION_GBS", Type::number, "tofu",
                        "Injection bandwidth of a node in the timing model (positive).")
                    .unit("GB/s")
                    .note("the model's"));
    b.push_back(Builder("PMR_TOFU_LATENCY_US", Type::duration, "tofu",
                        "Latency of an 8-byte put to a neighbour in the timing model (positive).")
                    .unit("us")
                    .note("the model's"));
    b.push_back(Builder("PMR_TOFU_HOP_LATENCY_US", Type::duration, "tofu",
                        "Latency of each further hop in the timing model (positive).")
                    .unit("us")
                    .note("the model's (0.1)"));
    b.push_back(Builder("PMR_TOFU_TIME_SCALE", Type::number, "tofu",
                        "Stretches every modelled time (positive).")
                    .by_default("1"));
    b.push_back(Builder("PMR_TOFU_QUEUE_DEPTH", Type::integer, "tofu",
                        "Commands per queue whose completion was not polled.")
                    .bounds(1, 65536)
                    .by_default("64"));
    b.push_back(Builder("PMR_TOFU_SHAPE", Type::text, "tofu",
                        "The 6D shape of the emulated machine, XxYxZ (a, b, c are 2x3x2).")
                    .note("the smallest shape that holds the job"));
    b.emplace_back("PMR_TOFU_FAULTY", Type::text, "tofu",
                   "Faulty nodes, \"X,Y,Z,a,b,c ...\": no rank of a virtual torus is placed on "
                   "them.");
    // neighbour exchange ------------------------------------------------------------------------
    b.push_back(Builder("PMR_NEIGHBOR_ALGORITHM", Type::choice, "neighbor",
                        "Algorithm of `pmr::NeighborExchange`s whose options leave it automatic. "
                        "Every rank must give the same.")
                    .choices({"automatic|auto", "direct", "split"})
                    .by_default("automatic"));
    b.push_back(Builder("PMR_NEIGHBOR_CROSSOVER", Type::size, "neighbor",
                        "automatic: messages from this size on are split over the rails, where "
                        "the options give no crossover.")
                    .unit("B")
                    .note("the calibration, else per provider"));
    b.push_back(Builder("PMR_NEIGHBOR_MIN_FRAGMENT", Type::size, "neighbor",
                        "split and automatic: no fragment is made smaller than this, where the "
                        "options give no size.")
                    .unit("B")
                    .note("per provider"));
    b.push_back(Builder("PMR_NEIGHBOR_CALIBRATE", Type::flag, "neighbor",
                        "0: automatic without a crossover takes the provider's default crossover "
                        "instead of timing both algorithms at set-up.")
                    .by_default("1"));
    // collectives ---------------------------------------------------------------------------------
    b.push_back(
        Builder("PMR_ALLREDUCE_ALGORITHM", Type::choice, "collectives",
                "The algorithm of the `Allreduce`s whose options leave it automatic. Must "
                "be the same on every rank.")
            .choices({"automatic|auto", "recursive_doubling|rd", "ring", "trinaryx3", "direct"})
            .by_default("automatic"));
    b.push_back(Builder("PMR_ALLREDUCE_ORDER", Type::choice, "collectives",
                        "The reduction order of the `Allreduce`s whose options leave it at "
                        "algorithm. Must be the same on every rank.")
                    .choices({"algorithm", "rank"})
                    .by_default("algorithm"));
    // mpi: libpmr-mpi behind pmr-run (docs/interposer.md) ---------------------------------------
    b.push_back(Builder("PMR_MPI", Type::choice, "mpi",
                        "What pmr-run carries on pmr: nothing (`off`), streams received with "
                        "persistent requests (`persistent`), or also plain `MPI_Isend`/`MPI_Irecv` "
                        "and blocking traffic (`all`: what most stencil codes run).")
                    .choices({"all", "persistent", "off"})
                    .by_default("all"));
    b.push_back(Builder("PMR_MPI_REPEATS", Type::integer, "mpi",
                        "Receives of a stream (and calls of a collective signature) before "
                        "pmr-run proposes to carry it.")
                    .bounds(1, 1e9)
                    .by_default("3"));
    b.push_back(Builder("PMR_MPI_SLOTS", Type::integer, "mpi",
                        "Windows per carried stream: how many messages a sender may run ahead of "
                        "its receiver before it keeps them.")
                    .bounds(1, 64)
                    .by_default("2"));
    b.push_back(Builder("PMR_MPI_MAX_BYTES", Type::size, "mpi",
                        "The largest message a stream is carried for; a larger one sends its "
                        "stream back to MPI (a carried message is copied three times, MPI's "
                        "single-copy path once: from 8 KiB a carried stream was faster or slower "
                        "than MPI depending on the machine's state).")
                    .unit("B")
                    .by_default("4K"));
    b.push_back(Builder("PMR_MPI_MIN_BYTES", Type::size, "mpi",
                        "Streams received with plain receives (MPI_Irecv, MPI_Recv) whose "
                        "messages all stay below this size are left to MPI: its own "
                        "small-message path is as fast as a carried stream's copies and "
                        "bookkeeping (measured on one node against Open MPI 4.1).")
                    .unit("B")
                    .by_default("1K"));
    b.push_back(Builder("PMR_MPI_MIN_BYTES_PERSISTENT", Type::size, "mpi",
                        "The same for streams received with persistent requests "
                        "(MPI_Recv_init), whose MPI path costs more. 0: every size (measured "
                        "against Open MPI 4.1, 2 ranks, 8 B-1 KiB: carried 1.1-1.5 times faster "
                        "than ob1; against UCX's PML 0.75-0.9 at 8-64 B, as when passed to MPI).")
                    .unit("B")
                    .by_default("0"));
    b.push_back(Builder("PMR_MPI_MAX_STREAMS", Type::integer, "mpi",
                        "Carried streams per process and direction (each holds windows on both "
                        "ends).")
                    .bounds(0, 1e6)
                    .by_default("64"));
    b.push_back(Builder("PMR_MPI_RD_BYTES", Type::size, "mpi",
                        "Global sums up to this size use recursive doubling (the order MPI uses "
                        "for short vectors on a power of two ranks); larger ones pmr's automatic "
                        "choice. 0: always automatic.")
                    .unit("B")
                    .by_default("64K"));
    b.push_back(Builder("PMR_MPI_REPORT", Type::integer, "mpi",
                        "1: a summary of what pmr-run carried and why the rest stayed on MPI, at "
                        "`MPI_Finalize` on rank 0; 2: also one line per stream and rank.")
                    .bounds(0, 2)
                    .by_default("0"));
    // qmp: libqmp (docs/qmp.md) -------------------------------------------------------------------
    b.push_back(Builder("PMR_QMP_DIRECT", Type::flag, "qmp",
                        "0: every QMP message handle copies through library-owned windows (so "
                        "that `QMP_change_address` can move every handle); 1: handles over "
                        "`QMP_allocate_memory` memory use it as their window.")
                    .by_default("1"));

    std::vector<Setting> out;
    out.reserve(b.size());
    for (Builder& builder : b) {
        out.push_back(std::move(builder.s));
    }
    return out;
}

} // namespace pmr::detail
