// SPDX-License-Identifier: MIT
// This MPI has no persistent allreduce: the variant is left out.
#include "allreduce_init.hpp"

namespace pmr_bench {

const char* persistent_allreduce_name() {
    return nullptr;
}

int allreduce_init(const void* /*send*/, void* /*recv*/, int /*count*/, MPI_Datatype /*type*/,
                   MPI_Op /*op*/, MPI_Comm /*comm*/, MPI_Info /*info*/, MPI_Request* /*request*/) {
    return MPI_ERR_OTHER;
}

} // namespace pmr_bench
