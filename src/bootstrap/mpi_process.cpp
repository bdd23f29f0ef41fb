// SPDX-License-Identifier: MIT
#include "bootstrap/mpi_process.hpp"

#include "base/environment.hpp"
#include "base/error.hpp"
#include "bootstrap/post_office.hpp"

#include <mpi.h>

#include <atomic>

namespace pmr::detail::bootstrap {

bool mpi_active() noexcept {
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized != 0 && finalized == 0;
}

void require_mpi(const std::string& where) {
    (void)settings();
    if (!mpi_active()) {
        raise<BootstrapError>("MPI is not initialised (or already finalised)", where,
                              "Create pmr objects between MPI_Init and MPI_Finalize.");
    }
}

void world_position(int& rank, int& size) noexcept {
    rank = 0;
    size = 1;
    if (mpi_active()) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
}

int max_user_tag() {
    return tag_base();
}

namespace {
std::atomic<void (*)() noexcept> finalize_hook{nullptr};

int run_finalize_hook(MPI_Comm /*comm*/, int /*keyval*/, void* /*value*/, void* /*extra*/) {
    if (auto hook = finalize_hook.exchange(nullptr)) {
        hook();
    }
    return MPI_SUCCESS;
}
} // namespace

void at_finalize(void (*hook)() noexcept) {
    if (finalize_hook.exchange(hook) != nullptr) {
        return; // the attribute is set already
    }
    int keyval = MPI_KEYVAL_INVALID;
    check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, run_finalize_hook, &keyval, nullptr),
          "MPI_Comm_create_keyval");
    check(MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr), "MPI_Comm_set_attr");
}

} // namespace pmr::detail::bootstrap
