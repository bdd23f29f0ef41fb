# MPI for pmr, any implementation: finds MPI's C library (pmr never uses the deprecated MPI C++
# bindings) and, with PMR_WITH_FORTRAN, its Fortran bindings; tells which implementation it is, and
# sets the launcher flags the tests, examples and benchmarks use. Sets:
#   PMR_MPI_IMPLEMENTATION        OpenMPI, MPICH or unknown (from the library's version string)
#   PMR_MPIEXEC_FLAGS             flags for every multi-rank run on one node (root, oversubscription)
#   PMR_MPIEXEC_KEEP_GOING_FLAGS  flags that keep the other ranks running when one of them dies
#   PMR_PC_MPI_REQUIRES           the MPI's own pkg-config module for pmr.pc, if it has one
#   PMR_MPI_C_COMPILER_PATH       the MPI C compiler wrapper (full path), if there is one

include(CheckLanguage)
check_language(Fortran)
if(CMAKE_Fortran_COMPILER)
  set(_pmr_fortran_default ON)
else()
  set(_pmr_fortran_default OFF)
endif()
option(PMR_WITH_FORTRAN "Fortran module pmr (needs a Fortran compiler and MPI's Fortran bindings)"
       ${_pmr_fortran_default})
set(_pmr_mpi_components C)
if(PMR_WITH_FORTRAN)
  enable_language(Fortran)
  list(APPEND _pmr_mpi_components Fortran)
endif()
find_package(MPI REQUIRED COMPONENTS ${_pmr_mpi_components})
if(PMR_WITH_FORTRAN)
  set(PMR_WITH_FORTRAN_01 1)
else()
  set(PMR_WITH_FORTRAN_01 0)
endif()

# Which MPI: the library's own version string, else the launcher's.
set(PMR_MPI_IMPLEMENTATION unknown)
if(MPI_C_LIBRARY_VERSION_STRING MATCHES "Open MPI")
  set(PMR_MPI_IMPLEMENTATION OpenMPI)
elseif(MPI_C_LIBRARY_VERSION_STRING MATCHES "MPICH")
  set(PMR_MPI_IMPLEMENTATION MPICH)
endif()
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _pmr_mpiexec_version
                ERROR_VARIABLE _pmr_mpiexec_version RESULT_VARIABLE _pmr_rc TIMEOUT 20)
set(_pmr_launcher unknown)
if(_pmr_mpiexec_version MATCHES "Open MPI|OpenRTE")
  set(_pmr_launcher OpenMPI)
elseif(_pmr_mpiexec_version MATCHES "HYDRA")
  set(_pmr_launcher MPICH)
endif()
if(PMR_MPI_IMPLEMENTATION STREQUAL "unknown")
  set(PMR_MPI_IMPLEMENTATION ${_pmr_launcher})
elseif(NOT _pmr_launcher STREQUAL "unknown" AND NOT _pmr_launcher STREQUAL PMR_MPI_IMPLEMENTATION)
  message(WARNING "pmr: MPI is ${PMR_MPI_IMPLEMENTATION} but MPIEXEC_EXECUTABLE "
                  "(${MPIEXEC_EXECUTABLE}) is the launcher of ${_pmr_launcher}: every rank of the "
                  "tests would run alone. Pass the matching launcher, e.g. "
                  "-DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich for Debian's MPICH.")
endif()

set(PMR_MPI_IMPLEMENTATION ${PMR_MPI_IMPLEMENTATION} CACHE INTERNAL "MPI implementation found")
# The full path of the MPI C compiler, which the installed pmrConfig.cmake hands to FindMPI.
unset(PMR_MPI_C_COMPILER_PATH CACHE)
find_program(PMR_MPI_C_COMPILER_PATH NAMES ${MPI_C_COMPILER})
mark_as_advanced(PMR_MPI_C_COMPILER_PATH)

if(PMR_MPI_IMPLEMENTATION STREQUAL "OpenMPI")
  # Root in containers, more ranks than cores, no binding (ranks share the cores), and the plain
  # shared-memory transport so that MPI's own set-up stays out of the network.
  set(PMR_MPIEXEC_FLAGS --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader
      --mca pml ob1)
  set(PMR_MPIEXEC_KEEP_GOING_FLAGS --mca orte_abort_on_non_zero_status 0)
elseif(PMR_MPI_IMPLEMENTATION STREQUAL "MPICH")
  # Hydra runs as root, oversubscribes and leaves ranks unbound by default.
  set(PMR_MPIEXEC_FLAGS)
  set(PMR_MPIEXEC_KEEP_GOING_FLAGS -disable-auto-cleanup)
else()
  set(PMR_MPIEXEC_FLAGS)
  set(PMR_MPIEXEC_KEEP_GOING_FLAGS)
endif()

# pmr.pc names the MPI's pkg-config module when there is one for this very installation, so that
# `cc $(pkg-config --cflags --libs pmr)` works without the MPI compiler wrapper too.
set(PMR_PC_MPI_REQUIRES "")
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  if(PMR_MPI_IMPLEMENTATION STREQUAL "OpenMPI")
    set(_pmr_pc_candidates ompi-c)
  elseif(PMR_MPI_IMPLEMENTATION STREQUAL "MPICH")
    set(_pmr_pc_candidates mpich)
  else()
    set(_pmr_pc_candidates)
  endif()
  foreach(_pmr_pc IN LISTS _pmr_pc_candidates)
    pkg_check_modules(_pmr_pc_mpi QUIET ${_pmr_pc})
    foreach(_pmr_dir IN LISTS _pmr_pc_mpi_INCLUDE_DIRS)
      if(_pmr_dir IN_LIST MPI_C_INCLUDE_DIRS)
        set(PMR_PC_MPI_REQUIRES ${_pmr_pc})
      endif()
    endforeach()
  endforeach()
endif()
message(STATUS "pmr: MPI ${MPI_C_VERSION} from ${PMR_MPI_IMPLEMENTATION}, launcher "
               "${MPIEXEC_EXECUTABLE}, Fortran ${PMR_WITH_FORTRAN}")
