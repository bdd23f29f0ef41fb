// SPDX-License-Identifier: MIT
#include "bootstrap/communicator_record.hpp"

#include "bootstrap/mpi_process.hpp"
#include "bootstrap/post_office.hpp"

#include "base/backoff.hpp"
#include "base/node.hpp"

#include <unistd.h>

namespace pmr::detail {

std::shared_ptr<CommunicatorRecord> CommunicatorRecord::create(MPI_Comm comm, bool owns_comm) {
    auto record = std::make_shared<CommunicatorRecord>();
    record->comm = comm;
    record->owns_comm = owns_comm;
    bootstrap::check(MPI_Comm_dup(comm, &record->setup), "MPI_Comm_dup");
    int size = 0;
    bootstrap::check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    struct Entry {
        std::int32_t pid;
        std::int32_t world_rank;
        std::uint64_t node_key;
    };
    const Entry mine{static_cast<std::int32_t>(getpid()),
                     static_cast<std::int32_t>(bootstrap::world_rank_of(comm,
                                                                        [&] {
                                                                            int rank = 0;
                                                                            MPI_Comm_rank(comm,
                                                                                          &rank);
                                                                            return rank;
                                                                        }())),
                     node_key()};
    std::vector<Entry> all(static_cast<std::size_t>(size));
    bootstrap::check(MPI_Allgather(&mine, sizeof(Entry), MPI_BYTE, all.data(), sizeof(Entry),
                                   MPI_BYTE, record->setup),
                     "MPI_Allgather");
    record->peers.reserve(all.size());
    int on_this_node = 0;
    {
        auto& office = bootstrap::post_office();
        std::lock_guard<std::mutex> lock(office.mutex);
        for (const Entry& e : all) {
            PeerRecord peer{e.pid, e.node_key, {}};
            record->peers.push_back(peer);
            on_this_node += e.node_key == node_key() ? 1 : 0;
            if (e.world_rank >= 0) {
                office.peers.emplace(e.world_rank, peer);
            }
        }
    }
    // More ranks here than CPUs: waits must not spin (base/backoff.hpp).
    SpinPolicy::instance().set_ranks_on_node(on_this_node);
    return record;
}

CommunicatorRecord::~CommunicatorRecord() {
    if (!bootstrap::mpi_active()) {
        return; // MPI_Finalize has released them
    }
    if (setup != MPI_COMM_NULL) {
        MPI_Comm_free(&setup);
    }
    if (owns_comm && comm != MPI_COMM_NULL) {
        MPI_Comm_free(&comm);
    }
}

} // namespace pmr::detail
