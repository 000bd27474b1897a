# Test registration helpers.
#
# mpitron_add_test(NAME SOURCES ... LIBS ...)
#   A single-process GoogleTest binary, registered as one ctest test.
# mpitron_add_mpi_test(NAME TARGET NP n [TIMEOUT s] [ARGS ...])
#   Runs an already-built test binary under ${MPIEXEC_EXECUTABLE} with n ranks, so the same suite
#   runs under mpirun or srun (-DMPIEXEC_EXECUTABLE=srun -DMPIEXEC_PREFLAGS=--mpi=pmix).

include(GoogleTest)

# Open MPI on a small machine: allow root, oversubscribe, and sleep instead of spinning while idle.
set(MPITRON_MPIEXEC_DEFAULT_PREFLAGS "")
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _mpitron_mpiexec_version
                ERROR_QUIET)
if(_mpitron_mpiexec_version MATCHES "Open MPI")
  set(MPITRON_MPIEXEC_DEFAULT_PREFLAGS
      --oversubscribe --allow-run-as-root --mca mpi_yield_when_idle 1 --bind-to none)
endif()
set(MPITRON_MPIEXEC_PREFLAGS "${MPITRON_MPIEXEC_DEFAULT_PREFLAGS}" CACHE STRING
    "Launcher flags placed before the program in every multi-rank test")

function(mpitron_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest_main mpitron_warnings)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300)
endfunction()

function(mpitron_add_mpi_test name)
  cmake_parse_arguments(ARG "" "TARGET;NP;TIMEOUT" "ARGS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  if(TARGET ${ARG_TARGET})
    set(program $<TARGET_FILE:${ARG_TARGET}>)
  else()
    set(program ${ARG_TARGET})
  endif()
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ARG_NP}
                   ${MPITRON_MPIEXEC_PREFLAGS} ${MPIEXEC_PREFLAGS}
                   ${program} ${MPIEXEC_POSTFLAGS} ${ARG_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} PROCESSORS ${ARG_NP})
endfunction()
