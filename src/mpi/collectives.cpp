// SPDX-License-Identifier: MIT
// Repeated MPI_Allreduce, MPI_Barrier and MPI_Bcast carried by pmr's persistent collectives, and
// the report at MPI_Finalize.
#include "mpi/interposer.hpp"

#include "mpi/pmpi.hpp"

#include <sched.h>

#include <algorithm>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pmr::mpi {

namespace {

// Collective signatures followed per communicator (carried or not).
constexpr std::size_t followed_signatures = 256;

using pmr::detail::ElementKind;

/// The element kind pmr reduces for a built-in MPI type, or bytes if none.
ElementKind element_of(MPI_Datatype type) {
    auto integer = [](int size) { return size == 4 ? ElementKind::i32 : ElementKind::i64; };
    if (type == MPI_DOUBLE || type == MPI_DOUBLE_PRECISION || type == MPI_REAL8) {
        return ElementKind::f64;
    }
    if (type == MPI_FLOAT || type == MPI_REAL || type == MPI_REAL4) {
        return ElementKind::f32;
    }
    if (type == MPI_INT || type == MPI_INT32_T || type == MPI_INTEGER || type == MPI_INTEGER4) {
        return integer(sizeof(int)); // Fortran INTEGER is a C int on every ABI pmr builds for
    }
    if (type == MPI_LONG || type == MPI_LONG_LONG || type == MPI_LONG_LONG_INT ||
        type == MPI_INT64_T || type == MPI_INTEGER8) {
        return type == MPI_LONG ? integer(sizeof(long)) : ElementKind::i64;
    }
    if (type == MPI_C_DOUBLE_COMPLEX || type == MPI_DOUBLE_COMPLEX) {
        return ElementKind::c64;
    }
    if (type == MPI_C_FLOAT_COMPLEX || type == MPI_COMPLEX) {
        return ElementKind::c32;
    }
    return ElementKind::bytes;
}

std::size_t element_bytes(ElementKind kind) {
    switch (kind) {
    case ElementKind::f32:
    case ElementKind::i32:
        return 4;
    case ElementKind::f64:
    case ElementKind::i64:
    case ElementKind::c32:
        return 8;
    case ElementKind::c64:
        return 16;
    case ElementKind::bytes:
        break;
    }
    return 1;
}

bool reduce_op_of(MPI_Op op, pmr::ReduceOp& out) {
    if (op == MPI_SUM) {
        out = pmr::ReduceOp::sum;
    } else if (op == MPI_MAX) {
        out = pmr::ReduceOp::max;
    } else if (op == MPI_MIN) {
        out = pmr::ReduceOp::min;
    } else {
        return false;
    }
    return true;
}

/// Recursive doubling for global sums up to PMR_MPI_RD_BYTES (default 64 KiB): its fixed tree
/// ((x0 + x1) + (x2 + x3) on 4 ranks) is the one MPI libraries use for short vectors on a power
/// of two ranks, so that results match MPI's to the last bit there; pmr's automatic choice
/// otherwise (PMR_MPI_RD_BYTES=0: always automatic).
pmr::AllreduceOptions allreduce_options(std::size_t bytes, std::size_t rd_bytes) {
    pmr::AllreduceOptions options;
    if (bytes <= rd_bytes) {
        options.algorithm = pmr::AllreduceAlgorithm::recursive_doubling;
    }
    return options;
}

std::int64_t describe(int kind, std::int64_t a, std::int64_t b, std::int64_t c) {
    // A value every rank computes alike from what MPI requires to be alike (handles differ
    // between processes), kept positive so that its negation is representable.
    std::uint64_t h = 1469598103934665603ULL;
    for (std::int64_t v : {static_cast<std::int64_t>(kind), a, b, c}) {
        h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ULL;
    }
    return static_cast<std::int64_t>(h >> 1);
}

} // namespace

CollectiveState* Interposer::collective(Comm& comm, const CollectiveKey& key, bool qualifies,
                                        std::size_t bytes) {
    if (comm.last_collective != nullptr && comm.last_key == key) {
        return comm.last_collective->core ? comm.last_collective : nullptr;
    }
    auto it = comm.collectives.find(key);
    if (it == comm.collectives.end()) {
        // Every rank calls the same collectives in the same order, so every rank stops following
        // new signatures at the same call (a code summing ever new lengths would otherwise grow
        // the map, and each carried one holds windows).
        if (comm.collectives.size() >= followed_signatures) {
            return nullptr;
        }
        it = comm.collectives.emplace(key, CollectiveState{}).first;
        it->second.bytes = bytes;
    }
    CollectiveState& state = it->second;
    if (state.decided) {
        comm.last_key = key;
        comm.last_collective = &state;
        return state.core ? &state : nullptr;
    }
    if (++state.calls < settings_.repeats) {
        return nullptr;
    }
    // The same call on every rank (collectives run in the same order everywhere and MPI requires
    // these arguments to match): agree once whether all ranks can carry it.
    state.decided = true;
    std::int64_t local[3] = {qualifies ? 0 : 1, 0, 0};
    const std::int64_t h =
        key.kind == 1
            ? describe(1, 0, 0, 0)
            : describe(key.kind, key.count, static_cast<std::int64_t>(state.bytes), key.root);
    local[1] = h;
    local[2] = -h;
    std::int64_t agreed[3] = {0, 0, 0};
    MPI_Request request = MPI_REQUEST_NULL;
    call(PMPI_Iallreduce)(local, agreed, 3, MPI_INT64_T, MPI_MAX, comm.handle, &request);
    wait_mpi(&request, MPI_STATUS_IGNORE);
    if (agreed[0] != 0 || agreed[1] != h || agreed[2] != -h) {
        state.reason = qualifies ? Reason::disagreement : Reason::datatype;
        return nullptr;
    }
    try {
        if (!comm.pcomm) {
            comm.pcomm = std::make_unique<pmr::Communicator>(comm.handle);
        }
        if (key.kind == 0 || key.kind == 3) {
            pmr::ReduceOp op{};
            reduce_op_of(key.op, op);
            state.core = pmr::detail::CollectiveCore::allreduce(
                *comm.pcomm, element_of(key.type), static_cast<std::size_t>(key.count), op,
                allreduce_options(state.bytes, settings_.rd_bytes), nullptr, nullptr);
        } else if (key.kind == 1) {
            state.core = pmr::detail::CollectiveCore::barrier(*comm.pcomm);
        } else {
            state.core = pmr::detail::CollectiveCore::broadcast(*comm.pcomm, 1, state.bytes,
                                                                key.root, nullptr);
        }
    } catch (const std::exception& e) {
        // A set-up that fails on one rank fails on all (pmr's collective constructors agree).
        std::fprintf(stderr, "pmr-mpi: rank %d: a collective stays on MPI: %s\n", world_rank_,
                     e.what());
        state.reason = Reason::disagreement;
        return nullptr;
    }
    state.reason = Reason::carried;
    return &state;
}

void Interposer::run(CollectiveState& state) {
    state.core.start();
    // test() rather than wait(): this rank's carried sends must keep moving meanwhile.
    wait_until([&state] { return state.core.test(); });
    ++state.carried.messages;
    state.carried.bytes += state.bytes;
}

int Interposer::allreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op,
                          MPI_Comm comm) {
    Comm* c = find(comm);
    if (c == nullptr || c->id == 0 || count <= 0) {
        return PMPI_Allreduce(in, out, count, type, op, comm);
    }
    const ElementKind kind = element_of(type);
    pmr::ReduceOp reduce{};
    bool qualifies = kind != ElementKind::bytes && reduce_op_of(op, reduce);
    if (qualifies && (kind == ElementKind::c32 || kind == ElementKind::c64)) {
        qualifies = reduce == pmr::ReduceOp::sum;
    }
    CollectiveKey key{0, count, type, op, 0};
    CollectiveState* state =
        collective(*c, key, qualifies, static_cast<std::size_t>(count) * element_bytes(kind));
    if (state == nullptr) {
        // Non-blocking on every rank alike (a blocking and a non-blocking collective do not
        // match), so that carried traffic keeps moving while it runs.
        MPI_Request request = MPI_REQUEST_NULL;
        const int rc = PMPI_Iallreduce(in, out, count, type, op, comm, &request);
        return rc != MPI_SUCCESS ? rc : wait_mpi(&request, MPI_STATUS_IGNORE);
    }
    auto* data = static_cast<std::byte*>(state->core.data());
    std::memcpy(data, in == MPI_IN_PLACE ? out : in, state->bytes);
    run(*state);
    std::memcpy(out, data, state->bytes);
    return MPI_SUCCESS;
}

int Interposer::iallreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op,
                           MPI_Comm comm, MPI_Request* request) {
    Comm* c = find(comm);
    if (c == nullptr || c->id == 0 || count <= 0) {
        return PMPI_Iallreduce(in, out, count, type, op, comm, request);
    }
    const ElementKind kind = element_of(type);
    pmr::ReduceOp reduce{};
    bool qualifies = kind != ElementKind::bytes && reduce_op_of(op, reduce);
    if (qualifies && (kind == ElementKind::c32 || kind == ElementKind::c64)) {
        qualifies = reduce == pmr::ReduceOp::sum;
    }
    // A signature of its own: blocking and non-blocking collectives are separate sequences.
    CollectiveKey key{3, count, type, op, 0};
    CollectiveState* state =
        collective(*c, key, qualifies, static_cast<std::size_t>(count) * element_bytes(kind));
    if (state == nullptr) {
        return PMPI_Iallreduce(in, out, count, type, op, comm, request);
    }
    if (state->core.active()) {
        // The previous run of this signature is still in flight here (every rank started it):
        // one run at a time.
        wait_until([this, state] {
            for (Op* o : collective_ops_) {
                if (o->collective == state) {
                    return false;
                }
            }
            return true;
        });
    }
    std::memcpy(state->core.data(), in == MPI_IN_PLACE ? out : in, state->bytes);
    state->core.start();
    Op* o = make_op(Op::Kind::collective, false, out, count, type, MPI_PROC_NULL, 0, c);
    o->collective = state;
    o->active = true;
    collective_ops_.push_back(o);
    *request = o->handle;
    return MPI_SUCCESS;
}

int Interposer::barrier(MPI_Comm comm) {
    Comm* c = find(comm);
    if (c == nullptr || c->id == 0) {
        return PMPI_Barrier(comm);
    }
    CollectiveState* state =
        collective(*c, CollectiveKey{1, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, 0}, true, 0);
    if (state == nullptr) {
        // Non-blocking on every rank alike (a blocking and a non-blocking collective do not
        // match), so that carried traffic keeps moving while it runs.
        MPI_Request request = MPI_REQUEST_NULL;
        const int rc = PMPI_Ibarrier(comm, &request);
        return rc != MPI_SUCCESS ? rc : wait_mpi(&request, MPI_STATUS_IGNORE);
    }
    run(*state);
    return MPI_SUCCESS;
}

int Interposer::bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    Comm* c = find(comm);
    if (c == nullptr || c->id == 0 || count <= 0) {
        return PMPI_Bcast(buf, count, type, root, comm);
    }
    const TypeInfo& info = type_info(type);
    const std::size_t bytes = static_cast<std::size_t>(count) * static_cast<std::size_t>(info.size);
    // Keyed by bytes, not by (count, type): MPI lets the ranks describe the same bytes
    // differently.
    CollectiveKey key{2, static_cast<std::int64_t>(bytes), MPI_DATATYPE_NULL, MPI_OP_NULL, root};
    CollectiveState* state =
        collective(*c, key, info.contiguous && bytes <= settings_.max_bytes, bytes);
    if (state == nullptr) {
        // Non-blocking on every rank alike (a blocking and a non-blocking collective do not
        // match), so that carried traffic keeps moving while it runs.
        MPI_Request request = MPI_REQUEST_NULL;
        const int rc = PMPI_Ibcast(buf, count, type, root, comm, &request);
        return rc != MPI_SUCCESS ? rc : wait_mpi(&request, MPI_STATUS_IGNORE);
    }
    auto* data = static_cast<std::byte*>(state->core.data());
    std::byte* user = static_cast<std::byte*>(buf) + info.lb;
    if (c->rank == root) {
        std::memcpy(data, user, bytes);
    }
    run(*state);
    if (c->rank != root) {
        std::memcpy(user, data, bytes);
    }
    return MPI_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Report

void Interposer::write_report() {
    if (!settings_.report) {
        return;
    }
    // Per rank, summed over the ranks: streams and traffic each way, why streams and collectives
    // stayed on MPI.
    constexpr auto reasons = static_cast<std::size_t>(Reason::count_);
    enum : std::size_t {
        out_carried,
        sent_messages,
        sent_bytes,
        in_streams,
        received_messages,
        received_bytes,
        mpi_messages_of_carried,
        window_bytes,
        setup_microseconds,
        collectives_seen,
        collective_runs,
        collective_bytes,
        stream_reasons,
        collective_reasons = stream_reasons + reasons,
        fields = collective_reasons + reasons
    };
    std::vector<unsigned long long> mine(fields, 0);
    auto each_comm = [&](auto&& f) {
        for (auto& entry : comms_) {
            f(*entry.second);
        }
        for (auto& comm : freed_comms_) {
            f(*comm);
        }
    };
    each_comm([&](Comm& comm) {
        for (auto& entry : comm.out) {
            if (entry.second->carried) {
                ++mine[out_carried];
            }
            mine[sent_messages] += entry.second->pmr_sent.messages;
            mine[sent_bytes] += entry.second->pmr_sent.bytes;
        }
        for (auto& entry : comm.in) {
            const InStream& s = *entry.second;
            ++mine[in_streams];
            Reason r = s.reason;
            if (comm.id == 0) {
                r = comm.unknown_reason;
            }
            ++mine[stream_reasons + static_cast<std::size_t>(r)];
            mine[received_messages] += s.pmr_received.messages;
            mine[received_bytes] += s.pmr_received.bytes;
            if (s.state == InStream::State::carried) {
                mine[mpi_messages_of_carried] += s.switch_at;
                // Both ends' windows: the receiver's ring and the sender's.
                mine[window_bytes] += 2 * s.slots.size() * (s.capacity + payload_offset);
                mine[setup_microseconds] += static_cast<unsigned long long>(s.setup_seconds * 1e6);
            }
        }
        for (auto& entry : comm.collectives) {
            ++mine[collectives_seen];
            const CollectiveState& st = entry.second;
            ++mine[collective_reasons + static_cast<std::size_t>(st.reason)];
            mine[collective_runs] += st.carried.messages;
            mine[collective_bytes] += st.carried.bytes;
        }
    });
    if (settings_.report_level >= 2) {
        each_comm([&](Comm& comm) {
            for (auto& entry : comm.in) {
                const InStream& s = *entry.second;
                std::fprintf(stderr,
                             "pmr-mpi rank %d: stream from %d tag %d: %s, %llu via pmr, "
                             "switch at %llu, %llu via MPI\n",
                             world_rank_, s.peer_world, s.tag, reason_name(s.reason),
                             static_cast<unsigned long long>(s.pmr_received.messages),
                             static_cast<unsigned long long>(s.switch_at),
                             static_cast<unsigned long long>(s.claimed_mpi));
            }
        });
    }
    std::vector<unsigned long long> sum(fields, 0);
    call(PMPI_Reduce)(mine.data(), sum.data(), static_cast<int>(fields), MPI_UNSIGNED_LONG_LONG,
                      MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank_ != 0) {
        return;
    }
    std::FILE* f = stderr;
    std::fprintf(f, "pmr-mpi report (%d ranks, PMR_MPI=%s, repeats %u)\n", world_size_,
                 settings_.mode == Mode::off          ? "off"
                 : settings_.mode == Mode::persistent ? "persistent"
                                                      : "all",
                 settings_.repeats);
    if (!off_reason_.empty()) {
        std::fprintf(f, "  everything on MPI: %s\n", off_reason_.c_str());
    }
    std::fprintf(f, "  point-to-point streams seen by receivers: %llu, carried by pmr: %llu\n",
                 sum[in_streams], sum[stream_reasons]);
    std::fprintf(f,
                 "  carried: %llu messages, %llu bytes sent; %llu messages, %llu bytes received"
                 " (%llu earlier messages of them went through MPI before the switch)\n",
                 sum[sent_messages], sum[sent_bytes], sum[received_messages], sum[received_bytes],
                 sum[mpi_messages_of_carried]);
    if (sum[stream_reasons] != 0) {
        std::fprintf(f,
                     "  per carried stream: %.1f us from proposal to switch (mean), %llu bytes "
                     "of windows (both ends)\n",
                     static_cast<double>(sum[setup_microseconds]) /
                         static_cast<double>(sum[stream_reasons]),
                     sum[window_bytes] / sum[stream_reasons]);
    }
    for (std::size_t r = 1; r < reasons; ++r) {
        if (sum[stream_reasons + r] != 0) {
            std::fprintf(f, "  streams on MPI, %s: %llu\n", reason_name(static_cast<Reason>(r)),
                         sum[stream_reasons + r]);
        }
    }
    std::fprintf(f,
                 "  collective signatures seen (summed over ranks): %llu, carried: %llu "
                 "(%llu runs, %llu bytes)\n",
                 sum[collectives_seen], sum[collective_reasons], sum[collective_runs],
                 sum[collective_bytes]);
    for (std::size_t r = 1; r < reasons; ++r) {
        if (sum[collective_reasons + r] != 0) {
            std::fprintf(f, "  collectives on MPI, %s: %llu\n", reason_name(static_cast<Reason>(r)),
                         sum[collective_reasons + r]);
        }
    }
    std::fflush(f);
}

} // namespace pmr::mpi
