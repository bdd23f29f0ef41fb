# SPDX-License-Identifier: MIT
# Spack recipe for pmr. Copy this directory into a Spack repository as packages/pmr/ (or use
# `spack repo create` and put it there), then e.g. `spack install pmr +ucx +fortran ^mpich`.
from spack.package import *


class Pmr(CMakePackage):
    """Persistent halo exchange beside MPI: persistent connections and windows for codes that
    exchange the same halos with the same neighbours many times (stencil codes, lattice QCD).
    MPI sets up the connections; the data path uses shared memory, UCX, verbs or Tofu directly.
    C++17 library with a C interface (pmr/pmr.h) and a Fortran module (use pmr)."""

    # Placeholders (a reserved domain) until pmr has a public repository: set homepage, git and
    # url, and add the sha256 of each release tarball (made with `git archive`; CMake only).
    homepage = "https://pmr.example.invalid"
    url = "https://pmr.example.invalid/releases/pmr-0.1.0.tar.gz"
    git = "https://pmr.example.invalid/pmr.git"

    license("MIT")

    version("main", branch="main")
    # version("0.1.0", sha256="<sha256 of the v0.1.0 tarball>") once the release is published.

    variant("shm", default=True, description="Shared-memory provider (Linux)")
    variant("ucx", default=True, description="UCX provider (any network UCX supports)")
    variant("verbs", default=False, description="InfiniBand verbs provider (rdma-core)")
    variant("tofu", default=False, description="Tofu provider (Fujitsu A64FX systems, uTofu)")
    variant("fortran", default=True, description="Fortran module pmr (use pmr)")
    variant("shared", default=True, description="Build libpmr as a shared library")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build", when="+fortran")
    depends_on("cmake@3.18:", type="build")
    depends_on("mpi")
    depends_on("ucx", when="+ucx")
    depends_on("rdma-core", when="+verbs")
    depends_on("catch2@2", type="test")

    # The shared-memory provider needs memfd and cross-memory attach; Tofu exists only on Fujitsu
    # systems, whose uTofu library comes with the system software, not from Spack.
    conflicts("+shm", when="platform=darwin", msg="the shm provider needs Linux")
    conflicts("+tofu", when="target=x86_64:", msg="Tofu is the interconnect of A64FX systems")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("PMR_WITH_SHM", "shm"),
            self.define_from_variant("PMR_WITH_UCX", "ucx"),
            self.define_from_variant("PMR_WITH_VERBS", "verbs"),
            self.define_from_variant("PMR_WITH_TOFU", "tofu"),
            self.define_from_variant("PMR_WITH_FORTRAN", "fortran"),
            self.define_from_variant("BUILD_SHARED_LIBS", "shared"),
            self.define("PMR_BUILD_TESTS", self.run_tests),
            self.define("PMR_BUILD_EXAMPLES", False),
            self.define("PMR_BUILD_BENCHMARKS", False),
            # The MPI of the spec, never another one found on the system.
            self.define("MPI_C_COMPILER", spec["mpi"].mpicc),
            self.define("MPI_CXX_COMPILER", spec["mpi"].mpicxx),
        ]
        if spec.satisfies("+fortran"):
            args.append(self.define("MPI_Fortran_COMPILER", spec["mpi"].mpifc))
        return args
