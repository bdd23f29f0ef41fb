// SPDX-License-Identifier: MIT
// QMP on pmr: memory, message memory and message handles.
//
// Every single handle owns one pmr connection and one library-owned window of the message's size.
// The connections pair by their tags (pmr/target.hpp): a message that travels in direction d of
// axis a carries tag 2a + (d > 0) both on the sender's send handle and on the receiver's receive
// handle, so on an axis of extent 2, where both neighbours are the same node, the message going
// up and the one going down never meet; on extent 1 the node's send and receive handles pair
// with each other. Explicit handles (send_to / receive_from) carry one tag of their own and pair
// in the order they are declared, per pair of nodes. A send packs the message memory (contiguous,
// strided, strided array or indexed) into its window; a receive unpacks it when it completes, so
// QMP_change_address only moves where data is packed from or unpacked to.
#include "internal.hpp"

#include <pmr/memory.hpp>
#include <pmr/settings.hpp>
#include <pmr/target.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

struct QMP_mem_struct {
    void* raw = nullptr;
    void* aligned = nullptr;
    std::size_t alignment = 0;
};

namespace qmp {
namespace {

/// Tags of explicit handles, and the distance between a message's tag and the tag of the unused
/// opposite direction of its connection (every relative tag lies below both).
constexpr int explicit_tag = 200;
constexpr int reverse_offset = 1000;
constexpr int max_axes = explicit_tag / 2;
/// pmr::allocate_bytes aligns to pages (4 KiB at least).
constexpr std::size_t page_bytes = 4096;

using Block = QMP_msgmem_struct::Block;

/// Joins blocks that continue each other, so a strided layout with stride == block size packs
/// with one copy.
std::vector<Block> merged(const std::vector<Block>& blocks) {
    std::vector<Block> out;
    for (const Block& b : blocks) {
        if (b.bytes == 0) {
            continue;
        }
        if (!out.empty() &&
            out.back().offset + static_cast<std::ptrdiff_t>(out.back().bytes) == b.offset) {
            out.back().bytes += b.bytes;
        } else {
            out.push_back(b);
        }
    }
    return out;
}

QMP_msgmem_t make_msgmem(char* base, const std::vector<Block>& blocks) {
    auto* m = new QMP_msgmem_struct;
    m->base = base;
    m->blocks = merged(blocks);
    for (const Block& b : m->blocks) {
        m->bytes += b.bytes;
    }
    return m;
}

template <class F>
QMP_msgmem_t declare_memory(const char* call, F&& make) {
    QMP_msgmem_t m = nullptr;
    const QMP_status_t rc = guarded(call, [&] {
        require_initialized();
        m = make();
    });
    return rc == QMP_SUCCESS ? m : nullptr;
}

void remove(std::vector<QMP_msghandle_t>& list, QMP_msghandle_t h) {
    auto it = std::find(list.begin(), list.end(), h);
    if (it != list.end()) {
        *it = list.back();
        list.pop_back();
    }
}

void pack(QMP_msghandle_t h) {
    std::byte* out = h->send.data();
    for (const Block& b : h->blocks) {
        std::memcpy(out, h->base + b.offset, b.bytes);
        out += b.bytes;
    }
}

void unpack(QMP_msghandle_t h) {
    const std::byte* in = h->recv.data();
    for (const Block& b : h->blocks) {
        std::memcpy(h->base + b.offset, in, b.bytes);
        in += b.bytes;
    }
}

/// PMR_QMP_DIRECT=0 makes every handle copy (so that every handle can move).
bool direct_allowed() {
    static const bool allowed = pmr::settings::flag("PMR_QMP_DIRECT").value_or(true);
    return allowed;
}

/// Makes the window of a single handle: over the user's memory for a direct handle, else
/// library-owned (the transfer goes through it, packed and unpacked).
void make_window(QMP_msghandle_t h) {
    if (h->kind == QMP_msghandle_struct::Kind::send) {
        h->send = h->direct ? pmr::SendWindow<std::byte>(
                                  h->connection, reinterpret_cast<std::byte*>(h->base), h->bytes)
                            : pmr::SendWindow<std::byte>(h->connection, h->bytes);
    } else {
        h->recv = h->direct ? pmr::RecvWindow<std::byte>(
                                  h->connection, reinterpret_cast<std::byte*>(h->base), h->bytes)
                            : pmr::RecvWindow<std::byte>(h->connection, h->bytes);
    }
}

/// The single handles of `h`: itself, or the parts of a multiple handle.
template <class F>
void for_each_single(QMP_msghandle_t h, F&& f) {
    if (h->kind == QMP_msghandle_struct::Kind::multiple) {
        for (QMP_msghandle_t part : h->parts) {
            f(part);
        }
    } else {
        f(h);
    }
}

/// A relative handle (axis >= 0 or `relative`) or an explicit one to or from `peer`.
QMP_msghandle_t declare(const char* call, QMP_comm_t comm, QMP_msgmem_t m, int peer, int axis,
                        int dir, bool sending, bool relative) {
    QMP_msghandle_t made = nullptr;
    const QMP_status_t rc = guarded(call, [&] {
        comm = resolve(comm);
        if (m == nullptr) {
            throw Failure{QMP_INVALID_ARG, "null message memory"};
        }
        int travel = 0; // direction the message travels along `axis` (relative handles)
        if (relative) {
            if (axis < 0) {
                throw Failure{QMP_INVALID_ARG, "negative axis"};
            }
            const Grid& g = comm->logical;
            if (g.empty()) {
                throw Failure{QMP_NONEIGHBOR_INFO, "no logical topology declared"};
            }
            if (axis >= static_cast<int>(g.dims.size()) || axis >= max_axes) {
                throw Failure{QMP_INVALID_ARG, "axis " + std::to_string(axis) + " of a " +
                                                   std::to_string(g.dims.size()) + "D topology"};
            }
            if (dir != 1 && dir != -1) {
                throw Failure{QMP_INVALID_ARG,
                              "direction " + std::to_string(dir) + " (must be +1 or -1)"};
            }
            std::vector<int> c = g.coords;
            c[static_cast<std::size_t>(axis)] += dir;
            peer = g.node_of(c.data());
            travel = sending ? dir : -dir;
        } else if (peer < 0 || peer >= comm->size) {
            throw Failure{QMP_NODE_OUTRANGE,
                          "node " + std::to_string(peer) + " of " + std::to_string(comm->size)};
        }
        const int tag = relative ? 2 * axis + (travel > 0 ? 1 : 0) : explicit_tag;
        const pmr::Target target = sending
                                       ? pmr::Target(*comm->pmr, peer, tag, tag + reverse_offset)
                                       : pmr::Target(*comm->pmr, peer, tag + reverse_offset, tag);
        auto h = std::make_unique<QMP_msghandle_struct>();
        h->kind = sending ? QMP_msghandle_struct::Kind::send : QMP_msghandle_struct::Kind::recv;
        h->comm = comm;
        h->peer = peer;
        h->axis = axis;
        h->dir = dir;
        h->base = m->base;
        h->blocks = m->blocks;
        h->bytes = m->bytes;
        h->connection = pmr::Connection(target);
        h->direct = direct_allowed() && h->blocks.size() == 1 && h->blocks[0].offset == 0 &&
                    pmr::is_pmr_memory(h->base, h->bytes);
        make_window(h.get());
        state().handles.push_back(h.get());
        made = h.release();
    });
    return rc == QMP_SUCCESS ? made : nullptr;
}

void start_single(QMP_msghandle_t h) {
    if (h->phase == QMP_msghandle_struct::Phase::active) {
        throw Failure{QMP_INVALID_OP, "the handle was started and has not completed"};
    }
    if (h->kind == QMP_msghandle_struct::Kind::send) {
        if (!h->direct) {
            pack(h);
        }
        h->send.init();
        h->send.post();
    } else {
        if (!h->granted) {
            h->recv.init();
        }
        h->granted = false;
        h->recv.post();
    }
    h->phase = QMP_msghandle_struct::Phase::active;
    state().active.push_back(h);
}

bool window_posted(QMP_msghandle_t h) {
    return h->kind == QMP_msghandle_struct::Kind::send ? h->send.core().posted()
                                                       : h->recv.core().posted();
}

/// Marks an active handle whose window has completed as done (unpacking a received message).
void complete(QMP_msghandle_t h) {
    if (h->kind == QMP_msghandle_struct::Kind::recv && !h->direct) {
        unpack(h);
    }
    h->phase = QMP_msghandle_struct::Phase::done;
    remove(state().active, h);
}

/// When the handles of `list` (distinct) are all this node has in flight, pmr's wait_all waits
/// for them with its own backoff, which suits more ranks than cores; returns false otherwise.
bool wait_with_pmr(const std::vector<QMP_msghandle_t>& list) {
    std::vector<pmr::detail::Waitable> windows;
    std::vector<QMP_msghandle_t> waited;
    for (QMP_msghandle_t h : list) {
        if (h->phase == QMP_msghandle_struct::Phase::active) {
            waited.push_back(h);
            windows.push_back(h->kind == QMP_msghandle_struct::Kind::send
                                  ? pmr::detail::waitable(h->send)
                                  : pmr::detail::waitable(h->recv));
        }
    }
    if (waited.size() != state().active.size()) {
        return false;
    }
    try {
        pmr::detail::wait_all(windows.data(), windows.size());
    } catch (...) {
        // The windows that completed before the error are idle: their handles are done.
        for (QMP_msghandle_t h : waited) {
            if (!window_posted(h)) {
                complete(h);
            }
        }
        throw;
    }
    for (QMP_msghandle_t h : waited) {
        complete(h);
    }
    return true;
}

/// Waits until every single handle in `list` (distinct) is done, completing the node's other
/// handles in flight meanwhile, then returns them to idle.
void wait_singles(const std::vector<QMP_msghandle_t>& list) {
    if (!wait_with_pmr(list)) {
        unsigned rounds = 0;
        for (;;) {
            bool all = true;
            for (QMP_msghandle_t h : list) {
                all = poll(h) && all;
            }
            if (all) {
                break;
            }
            progress_all();
            relax(rounds);
        }
    }
    for (QMP_msghandle_t h : list) {
        h->phase = QMP_msghandle_struct::Phase::idle;
    }
}

/// A direct handle's window lies over its memory for good.
void check_movable(QMP_msghandle_t h, const char* addr) {
    if (h->direct && addr != h->base) {
        throw Failure{QMP_NOTSUPPORTED,
                      "the handle sends from or receives into its QMP_allocate_memory memory "
                      "directly and cannot move; declare message memory elsewhere for handles "
                      "that move, or set PMR_QMP_DIRECT=0"};
    }
}

void move_to(QMP_msghandle_t h, char* addr) {
    check_movable(h, addr);
    h->base = addr;
}

QMP_msghandle_t check_handle(QMP_msghandle_t h) {
    require_initialized();
    if (h == nullptr) {
        throw Failure{QMP_INVALID_ARG, "null message handle"};
    }
    return h;
}

QMP_msghandle_t combine(const char* call, QMP_msghandle_t msgh[], int num, bool paired) {
    QMP_msghandle_t made = nullptr;
    const QMP_status_t rc = guarded(call, [&] {
        require_initialized();
        if (msgh == nullptr || num <= 0) {
            throw Failure{QMP_INVALID_ARG, "no handles to combine"};
        }
        std::vector<QMP_msghandle_t> parts;
        for (int i = 0; i < num; ++i) {
            QMP_msghandle_t h = msgh[i];
            if (h == nullptr || h->owner != nullptr) {
                throw Failure{QMP_INVALID_ARG,
                              "handle " + std::to_string(i) +
                                  (h == nullptr ? " is null" : " belongs to a multiple handle")};
            }
            if (h->phase == QMP_msghandle_struct::Phase::active) {
                throw Failure{QMP_INVALID_OP, "handle " + std::to_string(i) + " is in flight"};
            }
            if (h->kind == QMP_msghandle_struct::Kind::multiple) {
                parts.insert(parts.end(), h->parts.begin(), h->parts.end());
            } else {
                parts.push_back(h);
            }
        }
        auto sorted = parts;
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
            throw Failure{QMP_INVALID_ARG, "a handle appears twice"};
        }
        auto multiple = std::make_unique<QMP_msghandle_struct>();
        multiple->kind = QMP_msghandle_struct::Kind::multiple;
        multiple->paired = paired;
        multiple->parts = parts;
        // The multiple handle now owns every part; multiple handles given are taken apart.
        for (int i = 0; i < num; ++i) {
            if (msgh[i]->kind == QMP_msghandle_struct::Kind::multiple) {
                msgh[i]->parts.clear();
                delete msgh[i];
            }
        }
        for (QMP_msghandle_t part : parts) {
            part->owner = multiple.get();
        }
        made = multiple.release();
    });
    return rc == QMP_SUCCESS ? made : nullptr;
}

} // namespace

bool poll(QMP_msghandle_t h) {
    if (h->phase != QMP_msghandle_struct::Phase::active) {
        return true;
    }
    const bool complete =
        h->kind == QMP_msghandle_struct::Kind::send ? h->send.test() : h->recv.test();
    if (complete) {
        qmp::complete(h);
    }
    return complete;
}

void progress_all() {
    auto& active = state().active;
    // poll() removes completed handles from the list: walk a snapshot.
    for (std::size_t i = active.size(); i-- > 0;) {
        if (i >= active.size()) {
            continue;
        }
        try {
            poll(active[i]);
        } catch (...) {
            // Reported by the call that waits for this handle.
        }
    }
}

void destroy(QMP_msghandle_t h) {
    State& s = state();
    for_each_single(h, [&](QMP_msghandle_t single) {
        remove(s.active, single);
        remove(s.handles, single);
        if (single != h) {
            delete single;
        }
    });
    delete h;
}

} // namespace qmp

using qmp::Failure;
using qmp::guarded;

extern "C" {

// ---- Memory ----------------------------------------------------------------------------------

QMP_mem_t* QMP_allocate_aligned_memory(size_t nbytes, size_t alignment, int flags) {
    static_cast<void>(flags);
    QMP_mem_t* mem = nullptr;
    const QMP_status_t rc = guarded("QMP_allocate_aligned_memory", [&] {
        if ((alignment & (alignment - 1)) != 0) {
            throw Failure{QMP_INVALID_ARG,
                          "alignment " + std::to_string(alignment) + " is not a power of 2"};
        }
        const std::size_t align = std::max(alignment, alignof(std::max_align_t));
        auto m = std::make_unique<QMP_mem_struct>();
        m->alignment = align;
        if (align <= qmp::page_bytes) {
            // pmr memory: a window over it is reached by every provider's fastest path.
            m->raw = pmr::allocate_bytes(nbytes == 0 ? 1 : nbytes);
        } else {
            m->raw = ::operator new(nbytes == 0 ? 1 : nbytes, std::align_val_t(align));
            std::memset(m->raw, 0, nbytes);
        }
        m->aligned = m->raw;
        mem = m.release();
    });
    return rc == QMP_SUCCESS ? mem : nullptr;
}

QMP_mem_t* QMP_allocate_memory(size_t nbytes) {
    return QMP_allocate_aligned_memory(nbytes, QMP_ALIGN_DEFAULT, QMP_MEM_DEFAULT);
}

void* QMP_get_memory_pointer(QMP_mem_t* mem) {
    return mem != nullptr ? mem->aligned : nullptr;
}

void QMP_free_memory(QMP_mem_t* mem) {
    if (mem != nullptr) {
        if (mem->alignment <= qmp::page_bytes) {
            pmr::deallocate_bytes(mem->raw);
        } else {
            ::operator delete(mem->raw, std::align_val_t(mem->alignment));
        }
        delete mem;
    }
}

QMP_msgmem_t QMP_declare_msgmem(const void* mem, size_t nbytes) {
    return qmp::declare_memory("QMP_declare_msgmem", [&] {
        if (mem == nullptr && nbytes > 0) {
            throw Failure{QMP_INVALID_ARG, "null memory"};
        }
        // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): QMP's receives write through it
        char* base = const_cast<char*>(static_cast<const char*>(mem));
        return qmp::make_msgmem(base, {{0, nbytes}});
    });
}

QMP_msgmem_t QMP_declare_strided_msgmem(void* base, size_t blksize, int nblocks, ptrdiff_t stride) {
    return qmp::declare_memory("QMP_declare_strided_msgmem", [&] {
        if (nblocks < 0 || (base == nullptr && blksize > 0 && nblocks > 0)) {
            throw Failure{QMP_INVALID_ARG, nblocks < 0 ? "negative block count" : "null memory"};
        }
        std::vector<qmp::Block> blocks;
        blocks.reserve(static_cast<std::size_t>(nblocks));
        for (int i = 0; i < nblocks; ++i) {
            blocks.push_back({stride * i, blksize});
        }
        return qmp::make_msgmem(static_cast<char*>(base), blocks);
    });
}

QMP_msgmem_t QMP_declare_strided_array_msgmem(void* base[], size_t blksize[], int nblocks[],
                                              ptrdiff_t stride[], int num) {
    return qmp::declare_memory("QMP_declare_strided_array_msgmem", [&] {
        if (num <= 0 || base == nullptr || blksize == nullptr || nblocks == nullptr ||
            stride == nullptr) {
            throw Failure{QMP_INVALID_ARG, "no arrays"};
        }
        char* first = static_cast<char*>(base[0]);
        std::vector<qmp::Block> blocks;
        for (int a = 0; a < num; ++a) {
            if (nblocks[a] < 0 || (base[a] == nullptr && blksize[a] > 0 && nblocks[a] > 0)) {
                throw Failure{QMP_INVALID_ARG, "array " + std::to_string(a)};
            }
            const std::ptrdiff_t start = static_cast<char*>(base[a]) - first;
            for (int i = 0; i < nblocks[a]; ++i) {
                blocks.push_back({start + stride[a] * i, blksize[a]});
            }
        }
        return qmp::make_msgmem(first, blocks);
    });
}

QMP_msgmem_t QMP_declare_indexed_msgmem(void* base, int blocklen[], int index[], int elemsize,
                                        int count) {
    return qmp::declare_memory("QMP_declare_indexed_msgmem", [&] {
        if (count < 0 || elemsize <= 0 ||
            (count > 0 && (blocklen == nullptr || index == nullptr || base == nullptr))) {
            throw Failure{QMP_INVALID_ARG, "bad index arrays or element size"};
        }
        std::vector<qmp::Block> blocks;
        for (int i = 0; i < count; ++i) {
            if (blocklen[i] < 0) {
                throw Failure{QMP_INVALID_ARG, "negative block length"};
            }
            blocks.push_back(
                {static_cast<std::ptrdiff_t>(index[i]) * elemsize,
                 static_cast<std::size_t>(blocklen[i]) * static_cast<std::size_t>(elemsize)});
        }
        return qmp::make_msgmem(static_cast<char*>(base), blocks);
    });
}

void QMP_free_msgmem(QMP_msgmem_t m) {
    delete m;
}

// ---- Handles ---------------------------------------------------------------------------------

QMP_msghandle_t QMP_comm_declare_receive_relative(QMP_comm_t comm, QMP_msgmem_t m, int axis,
                                                  int dir, int priority) {
    static_cast<void>(priority);
    return qmp::declare("QMP_declare_receive_relative", comm, m, -1, axis, dir, false, true);
}
QMP_msghandle_t QMP_declare_receive_relative(QMP_msgmem_t m, int axis, int dir, int priority) {
    return QMP_comm_declare_receive_relative(nullptr, m, axis, dir, priority);
}

QMP_msghandle_t QMP_comm_declare_send_relative(QMP_comm_t comm, QMP_msgmem_t m, int axis, int dir,
                                               int priority) {
    static_cast<void>(priority);
    return qmp::declare("QMP_declare_send_relative", comm, m, -1, axis, dir, true, true);
}
QMP_msghandle_t QMP_declare_send_relative(QMP_msgmem_t m, int axis, int dir, int priority) {
    return QMP_comm_declare_send_relative(nullptr, m, axis, dir, priority);
}

QMP_msghandle_t QMP_comm_declare_send_to(QMP_comm_t comm, QMP_msgmem_t m, int rem_node_rank,
                                         int priority) {
    static_cast<void>(priority);
    return qmp::declare("QMP_declare_send_to", comm, m, rem_node_rank, -1, 0, true, false);
}
QMP_msghandle_t QMP_declare_send_to(QMP_msgmem_t m, int rem_node_rank, int priority) {
    return QMP_comm_declare_send_to(nullptr, m, rem_node_rank, priority);
}

QMP_msghandle_t QMP_comm_declare_receive_from(QMP_comm_t comm, QMP_msgmem_t m, int rem_node_rank,
                                              int priority) {
    static_cast<void>(priority);
    return qmp::declare("QMP_declare_receive_from", comm, m, rem_node_rank, -1, 0, false, false);
}
QMP_msghandle_t QMP_declare_receive_from(QMP_msgmem_t m, int rem_node_rank, int priority) {
    return QMP_comm_declare_receive_from(nullptr, m, rem_node_rank, priority);
}

QMP_msghandle_t QMP_declare_multiple(QMP_msghandle_t msgh[], int num) {
    return qmp::combine("QMP_declare_multiple", msgh, num, false);
}

QMP_msghandle_t QMP_declare_send_recv_pairs(QMP_msghandle_t msgh[], int num) {
    return qmp::combine("QMP_declare_send_recv_pairs", msgh, num, true);
}

QMP_status_t QMP_change_address(QMP_msghandle_t msg, void* addr) {
    return guarded(
        "QMP_change_address",
        [&] {
            qmp::check_handle(msg);
            if (msg->kind == QMP_msghandle_struct::Kind::multiple) {
                throw Failure{QMP_INVALID_ARG,
                              "a multiple handle: use QMP_change_address_multiple"};
            }
            if (addr == nullptr && msg->bytes > 0) {
                throw Failure{QMP_INVALID_ARG, "null address"};
            }
            if (msg->phase == QMP_msghandle_struct::Phase::active) {
                throw Failure{QMP_INVALID_OP, "the handle is in flight"};
            }
            qmp::move_to(msg, static_cast<char*>(addr));
        },
        msg);
}

QMP_status_t QMP_change_address_multiple(QMP_msghandle_t msg, void* addr[], int naddr) {
    return guarded(
        "QMP_change_address_multiple",
        [&] {
            qmp::check_handle(msg);
            if (msg->kind != QMP_msghandle_struct::Kind::multiple || addr == nullptr ||
                naddr != static_cast<int>(msg->parts.size())) {
                throw Failure{QMP_INVALID_ARG, "needs a multiple handle and one address per part"};
            }
            for (int i = 0; i < naddr; ++i) {
                QMP_msghandle_t part = msg->parts[static_cast<std::size_t>(i)];
                if (part->phase == QMP_msghandle_struct::Phase::active) {
                    throw Failure{QMP_INVALID_OP, "a part is in flight"};
                }
                if (addr[i] == nullptr && part->bytes > 0) {
                    throw Failure{QMP_INVALID_ARG, "null address " + std::to_string(i)};
                }
            }
            for (int i = 0; i < naddr; ++i) {
                qmp::check_movable(msg->parts[static_cast<std::size_t>(i)],
                                   static_cast<char*>(addr[i]));
            }
            for (int i = 0; i < naddr; ++i) {
                qmp::move_to(msg->parts[static_cast<std::size_t>(i)], static_cast<char*>(addr[i]));
            }
        },
        msg);
}

void QMP_free_msghandle(QMP_msghandle_t h) {
    if (h == nullptr) {
        return;
    }
    if (h->owner != nullptr) {
        qmp::fail("QMP_free_msghandle",
                  {QMP_INVALID_ARG, "the handle belongs to a multiple handle: free that one"}, h);
        return;
    }
    qmp::destroy(h);
}

QMP_status_t QMP_clear_to_send(QMP_msghandle_t mh, QMP_clear_to_send_t cts) {
    return guarded(
        "QMP_clear_to_send",
        [&] {
            qmp::check_handle(mh);
            if (cts != QMP_CTS_READY) {
                return;
            }
            qmp::for_each_single(mh, [](QMP_msghandle_t h) {
                if (h->kind == QMP_msghandle_struct::Kind::recv && !h->granted &&
                    h->phase != QMP_msghandle_struct::Phase::active) {
                    h->recv.init();
                    h->granted = true;
                }
            });
        },
        mh);
}

QMP_status_t QMP_start(QMP_msghandle_t h) {
    return guarded(
        "QMP_start",
        [&] {
            qmp::check_handle(h);
            if (h->kind != QMP_msghandle_struct::Kind::multiple) {
                qmp::start_single(h);
                return;
            }
            for (QMP_msghandle_t part : h->parts) {
                if (part->phase == QMP_msghandle_struct::Phase::active) {
                    throw Failure{QMP_INVALID_OP, "a part was started and has not completed"};
                }
            }
            // Grant every receive buffer first, so the neighbours' sends find them ready.
            for (QMP_msghandle_t part : h->parts) {
                if (part->kind == QMP_msghandle_struct::Kind::recv && !part->granted) {
                    part->recv.init();
                    part->granted = true;
                }
            }
            for (QMP_msghandle_t part : h->parts) {
                if (part->kind == QMP_msghandle_struct::Kind::send) {
                    qmp::start_single(part);
                }
            }
            for (QMP_msghandle_t part : h->parts) {
                if (part->kind == QMP_msghandle_struct::Kind::recv) {
                    qmp::start_single(part);
                }
            }
        },
        h);
}

QMP_status_t QMP_wait(QMP_msghandle_t h) {
    return guarded(
        "QMP_wait",
        [&] {
            qmp::check_handle(h);
            if (h->kind == QMP_msghandle_struct::Kind::multiple) {
                qmp::wait_singles(h->parts);
            } else {
                qmp::wait_singles({h});
            }
        },
        h);
}

QMP_status_t QMP_wait_all(QMP_msghandle_t h[], int num) {
    return guarded("QMP_wait_all", [&] {
        qmp::require_initialized();
        if (num < 0 || (num > 0 && h == nullptr)) {
            throw Failure{QMP_INVALID_ARG, "no handles"};
        }
        std::vector<QMP_msghandle_t> singles;
        for (int i = 0; i < num; ++i) {
            qmp::for_each_single(qmp::check_handle(h[i]),
                                 [&](QMP_msghandle_t single) { singles.push_back(single); });
        }
        std::sort(singles.begin(), singles.end());
        singles.erase(std::unique(singles.begin(), singles.end()), singles.end());
        qmp::wait_singles(singles);
    });
}

QMP_bool_t QMP_is_complete(QMP_msghandle_t h) {
    bool complete = false;
    const QMP_status_t rc = guarded(
        "QMP_is_complete",
        [&] {
            qmp::check_handle(h);
            complete = true;
            qmp::for_each_single(
                h, [&](QMP_msghandle_t single) { complete = qmp::poll(single) && complete; });
            if (!complete) {
                qmp::progress_all();
            }
        },
        h);
    return rc == QMP_SUCCESS && complete ? QMP_TRUE : QMP_FALSE;
}

} // extern "C"
