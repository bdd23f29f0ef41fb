# Runs PROGRAM under pmr-run with the report on and requires a zero exit code and streams and
# collectives carried by pmr (for programs that cannot ask the interposer themselves: Fortran);
# with -DREPORT_MATCH=regex, that the report matches it instead; -DARGS="..." are the program's.
# With -DRUN_OPTIONS="..." (pmr-run's own options) the report is left to them: PMR_MPI_REPORT is
# removed from the environment instead of set.
#   cmake -DMPIEXEC=... -DFLAGS=... -DRANKS=n -DRUN=pmr-run -DPROGRAM=... -P expect_carried.cmake
separate_arguments(flags UNIX_COMMAND "${FLAGS}")
separate_arguments(args UNIX_COMMAND "${ARGS}")
separate_arguments(run_options UNIX_COMMAND "${RUN_OPTIONS}")
if(DEFINED RUN_OPTIONS)
  unset(ENV{PMR_MPI_REPORT})
  unset(ENV{PMR_MPI})
else()
  set(ENV{PMR_MPI_REPORT} 1)
endif()
execute_process(COMMAND ${MPIEXEC} ${flags} -np ${RANKS} ${RUN} ${run_options} ${PROGRAM} ${args}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exit code ${rc}")
endif()
if(DEFINED REPORT_MATCH)
  if(NOT err MATCHES "${REPORT_MATCH}")
    message(FATAL_ERROR "the report does not say '${REPORT_MATCH}'")
  endif()
  return()
endif()
string(REGEX MATCH "carried by pmr: ([0-9]+)" _ "${err}")
set(streams "${CMAKE_MATCH_1}")
string(REGEX MATCH "signatures seen \\(summed over ranks\\): [0-9]+, carried: ([0-9]+)" _ "${err}")
if(NOT streams GREATER 0 OR NOT CMAKE_MATCH_1 GREATER 0)
  message(FATAL_ERROR "not carried: streams '${streams}', collectives '${CMAKE_MATCH_1}'")
endif()
