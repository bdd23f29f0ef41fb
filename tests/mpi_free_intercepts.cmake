# Passes only if the executable TEST (test_mpi_free) defines every MPI_ function that the library
# LIBRARY (libpmr) leaves undefined: test_mpi_free counts MPI calls through its own definitions, so
# a function libpmr calls without one there would go uncounted. NM is the nm program; SHARED is true
# for a shared libpmr (its dynamic symbol table is read) and false for an archive.
set(dynamic "")
if(SHARED)
  set(dynamic -D)
endif()
execute_process(COMMAND ${NM} ${dynamic} --undefined-only ${LIBRARY} RESULT_VARIABLE rc
                OUTPUT_VARIABLE needed ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "${NM} ${LIBRARY} failed: ${err}")
endif()
execute_process(COMMAND ${NM} --defined-only ${TEST} RESULT_VARIABLE rc OUTPUT_VARIABLE defined
                ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "${NM} ${TEST} failed: ${err}")
endif()
string(REGEX MATCHALL " U MPI_[A-Za-z0-9_]+" needed "${needed}")
string(REGEX MATCHALL " T MPI_[A-Za-z0-9_]+" defined "${defined}")
list(TRANSFORM needed REPLACE "^ U " "")
list(TRANSFORM defined REPLACE "^ T " "")
list(REMOVE_DUPLICATES needed)
list(LENGTH needed count)
if(count EQUAL 0)
  message(FATAL_ERROR "no MPI_ symbol found undefined in ${LIBRARY}: is it the right library?")
endif()
set(missing ${needed})
list(REMOVE_ITEM missing ${defined})
if(missing)
  string(REPLACE ";" ", " missing "${missing}")
  message(FATAL_ERROR "libpmr calls MPI functions that test_mpi_free does not intercept: "
                      "${missing}. Add an interceptor for each to tests/test_mpi_free.cpp.")
endif()
message("test_mpi_free intercepts all ${count} MPI functions libpmr calls")
