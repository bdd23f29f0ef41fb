# Installs the build in BUILD_DIR into WORK_DIR/prefix and builds the QMP consumer against it three
# ways, as users do, running each on 2 nodes:
#   - with the plain C compiler and `qmp-config --cflags` / `qmp-config --ldflags --libs`
#     (what QDP++ and Chroma's configure scripts do with --with-qmp=<prefix>);
#   - with the MPI C compiler wrapper and `pkg-config --cflags --libs qmp`;
#   - with find_package(pmr) and pmr::qmp.
# Prints "all qmp consumers passed" at the end.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("$ ${ARGN}\n${out}${err}")
  if(rc)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${command}")
  endif()
endfunction()

function(output var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${command}")
  endif()
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
set(source ${SOURCE_DIR}/consumer.c)
set(mpirun ${MPIEXEC} ${MPIEXEC_FLAGS} -np 2)

# qmp-config, from bin/ of the prefix.
set(qmp_config ${prefix}/bin/qmp-config)
if(NOT EXISTS ${qmp_config})
  message(FATAL_ERROR "qmp-config was not installed in ${prefix}/bin")
endif()
output(version ${qmp_config} --version)
if(NOT version STREQUAL "2.5.4")
  message(FATAL_ERROR "qmp-config --version printed '${version}'")
endif()
output(cflags ${qmp_config} --cflags)
output(libs ${qmp_config} --ldflags --libs)
message("qmp-config --cflags: ${cflags}\nqmp-config --ldflags --libs: ${libs}")
separate_arguments(cflags UNIX_COMMAND "${cflags}")
separate_arguments(libs UNIX_COMMAND "${libs}")
run(${C_COMPILER} -std=c99 -Wall -Wextra -pedantic -Werror ${cflags} -c ${source}
    -o ${WORK_DIR}/consumer.o)
run(${C_COMPILER} ${WORK_DIR}/consumer.o ${libs} -o ${WORK_DIR}/consumer_qmp_config)
run(${mpirun} ${WORK_DIR}/consumer_qmp_config)

# pkg-config qmp with the MPI compiler wrapper.
file(GLOB_RECURSE pc ${prefix}/*/qmp.pc)
if(NOT pc OR NOT PKG_CONFIG)
  message(FATAL_ERROR "qmp.pc was not installed or pkg-config is missing")
endif()
get_filename_component(pc_dir ${pc} DIRECTORY)
get_filename_component(libdir ${pc_dir} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
output(flags ${PKG_CONFIG} --cflags --libs qmp)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${MPI_C_COMPILER} -std=c99 -Wall -Wextra -pedantic -Werror ${source} ${flags}
    -Wl,-rpath,${libdir} -o ${WORK_DIR}/consumer_qmp_pc)
run(${mpirun} ${WORK_DIR}/consumer_qmp_pc)

# find_package(pmr) -> pmr::qmp.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DMPI_C_COMPILER=${MPI_C_COMPILER})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${mpirun} ${WORK_DIR}/build/consumer_qmp)
message("all qmp consumers passed")
