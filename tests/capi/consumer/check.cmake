# Installs the build in BUILD_DIR into WORK_DIR/prefix, then builds and runs, against it:
#   - the C consumer (and with FORTRAN the Fortran one) through find_package(pmr), in a project
#     without C++;
#   - the C consumer with the MPI C compiler wrapper and `pkg-config --cflags --libs pmr`, and with
#     the plain C compiler if pmr.pc names the MPI's own pkg-config module;
#   - with FORTRAN, the Fortran consumer with the MPI Fortran wrapper and pkg-config pmr-fortran.
# Prints "all consumers passed" at the end.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("$ ${ARGN}\n${out}${err}")
  if(rc)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${command}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# find_package(pmr) from C (and Fortran).
set(fortran_option -DWITH_FORTRAN=OFF)
if(FORTRAN)
  set(fortran_option -DWITH_FORTRAN=ON -DMPI_Fortran_COMPILER=${MPI_Fortran_COMPILER})
endif()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DMPI_C_COMPILER=${MPI_C_COMPILER} ${fortran_option})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${MPIEXEC} ${MPIEXEC_FLAGS} -np 1 ${WORK_DIR}/build/consumer_c)
if(FORTRAN)
  run(${MPIEXEC} ${MPIEXEC_FLAGS} -np 1 ${WORK_DIR}/build/consumer_fortran)
endif()

# pkg-config.
file(GLOB_RECURSE pc ${prefix}/*/pmr.pc)
if(NOT pc)
  message(FATAL_ERROR "pmr.pc was not installed")
endif()
get_filename_component(pc_dir ${pc} DIRECTORY)
get_filename_component(libdir ${pc_dir} DIRECTORY)
file(READ ${pc} pc_text)
message("${pc}:\n${pc_text}")
if(pc_text MATCHES "ompi-cxx|mpi-cxx|mpi_cxx")
  message(FATAL_ERROR "pmr.pc requires MPI's C++ bindings")
endif()
if(pc_text MATCHES "Cflags:[^\n]*-std=")
  message(FATAL_ERROR "pmr.pc forces a language standard on C programs")
endif()
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "pkg-config is not installed")
endif()
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs pmr OUTPUT_VARIABLE flags
                RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(rc)
  message(FATAL_ERROR "pkg-config --cflags --libs pmr failed")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
set(c_source ${SOURCE_DIR}/consumer.c)
run(${MPI_C_COMPILER} -std=c99 -Wall -Wextra -pedantic -Werror ${c_source} ${flags}
    -Wl,-rpath,${libdir} -o ${WORK_DIR}/consumer_c_wrapper)
run(${MPIEXEC} ${MPIEXEC_FLAGS} -np 1 ${WORK_DIR}/consumer_c_wrapper)
if(pc_text MATCHES "Requires: [a-z]")
  run(${C_COMPILER} -std=c99 -Wall -Wextra -pedantic -Werror ${c_source} ${flags}
      -Wl,-rpath,${libdir} -o ${WORK_DIR}/consumer_c_plain)
  run(${MPIEXEC} ${MPIEXEC_FLAGS} -np 1 ${WORK_DIR}/consumer_c_plain)
else()
  message("pmr.pc names no MPI pkg-config module: the plain C compiler is not tried")
endif()

if(FORTRAN)
  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs pmr-fortran OUTPUT_VARIABLE fflags
                  RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc)
    message(FATAL_ERROR "pkg-config --cflags --libs pmr-fortran failed")
  endif()
  separate_arguments(fflags UNIX_COMMAND "${fflags}")
  run(${MPI_Fortran_COMPILER} ${SOURCE_DIR}/consumer.f90 ${fflags} -Wl,-rpath,${libdir}
      -o ${WORK_DIR}/consumer_fortran_wrapper)
  run(${MPIEXEC} ${MPIEXEC_FLAGS} -np 1 ${WORK_DIR}/consumer_fortran_wrapper)
endif()
message("all consumers passed")
