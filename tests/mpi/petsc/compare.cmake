# Runs the PETSc solve as is and under pmr-run and requires (1) the same iteration count,
# residual and solution norm to the last digit, (2) both runs to exit 0, (3) the report to show
# PETSc's halo streams and its global sums carried by pmr.
#   cmake -DMPIEXEC=... -DFLAGS=... -DRANKS=n -DRUN=pmr-run -DPROGRAM=... -P compare.cmake
separate_arguments(flags UNIX_COMMAND "${FLAGS}")
execute_process(COMMAND ${MPIEXEC} ${flags} -np ${RANKS} ${PROGRAM} -n 100
                OUTPUT_VARIABLE plain ERROR_VARIABLE plain_err RESULT_VARIABLE plain_rc)
set(ENV{PMR_MPI_REPORT} 1)
execute_process(COMMAND ${MPIEXEC} ${flags} -x PMR_MPI_REPORT -np ${RANKS} ${RUN} ${PROGRAM} -n 100
                OUTPUT_VARIABLE pmr ERROR_VARIABLE pmr_err RESULT_VARIABLE pmr_rc)
message("plain MPI:\n${plain}${plain_err}\nunder pmr-run:\n${pmr}${pmr_err}")
if(NOT plain_rc EQUAL 0 OR NOT pmr_rc EQUAL 0)
  message(FATAL_ERROR "exit codes: plain ${plain_rc}, pmr-run ${pmr_rc}")
endif()
string(REGEX MATCH "iterations [^\n]*" plain_line "${plain}")
string(REGEX MATCH "iterations [^\n]*" pmr_line "${pmr}")
if(plain_line STREQUAL "" OR NOT plain_line STREQUAL pmr_line)
  message(FATAL_ERROR "results differ: '${plain_line}' against '${pmr_line}'")
endif()
string(REGEX MATCH "carried by pmr: ([0-9]+)" _ "${pmr_err}")
set(streams "${CMAKE_MATCH_1}")
string(REGEX MATCH "signatures seen \\(summed over ranks\\): [0-9]+, carried: ([0-9]+)" _
       "${pmr_err}")
set(collectives "${CMAKE_MATCH_1}")
if(NOT streams GREATER 0 OR NOT collectives GREATER 0)
  message(FATAL_ERROR "PETSc's traffic was not carried: streams '${streams}', collectives "
                      "'${collectives}'")
endif()
message("same result to the last digit; ${streams} streams and ${collectives} collective "
        "signatures carried")
