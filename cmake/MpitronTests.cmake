# Test registration helpers.
#
# mpitron_add_test(NAME SOURCES ... LIBS ...)
#   A single-process GoogleTest binary, registered as one ctest test.
# mpitron_add_mpi_test(NAME TARGET NP n [TIMEOUT s] [ARGS ...])
#   Runs an already-built test binary under ${MPIEXEC_EXECUTABLE} with n ranks, so the same suite
#   runs under mpirun or srun (-DMPIEXEC_EXECUTABLE=srun -DMPIEXEC_PREFLAGS=--mpi=pmix).

include(GoogleTest)

# Launcher flags of every multi-rank test. AUTO (default) is recomputed at each configure from
# the launcher in MPIEXEC_EXECUTABLE: for Open MPI's mpiexec on a small machine, allow root,
# oversubscribe, and sleep instead of spinning while idle; nothing for other launchers (srun).
# Any other value (also empty) is used as given.
set(MPITRON_MPIEXEC_PREFLAGS "AUTO" CACHE STRING
    "Launcher flags placed before the program in every multi-rank test (AUTO: by launcher)")
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _mpitron_mpiexec_version
                ERROR_QUIET)
set(MPITRON_LAUNCHER_IS_OPEN_MPI OFF)
if(_mpitron_mpiexec_version MATCHES "Open MPI|OpenRTE")
  set(MPITRON_LAUNCHER_IS_OPEN_MPI ON)
endif()
if(MPITRON_MPIEXEC_PREFLAGS STREQUAL "AUTO")
  set(MPITRON_MPIEXEC_RESOLVED_PREFLAGS "")
  if(MPITRON_LAUNCHER_IS_OPEN_MPI)
    set(MPITRON_MPIEXEC_RESOLVED_PREFLAGS
        --oversubscribe --allow-run-as-root --mca mpi_yield_when_idle 1 --bind-to none)
  endif()
else()
  set(MPITRON_MPIEXEC_RESOLVED_PREFLAGS ${MPITRON_MPIEXEC_PREFLAGS})
endif()

function(mpitron_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest_main mpitron_warnings)
  mpitron_depend_on_cuda_module(${name})
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300)
endfunction()

function(mpitron_add_mpi_test name)
  cmake_parse_arguments(ARG "" "TARGET;NP;TIMEOUT" "ARGS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  _mpitron_mpiexec_command(command ${ARG_NP} ${ARG_TARGET} ${ARG_ARGS})
  add_test(NAME ${name} COMMAND ${command})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} PROCESSORS ${ARG_NP})
endfunction()

# The mpiexec command line for NP ranks running PROGRAM (a target name or a path) with ARGS.
function(_mpitron_mpiexec_command out np program)
  if(TARGET ${program})
    set(program $<TARGET_FILE:${program}>)
  endif()
  set(${out} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPITRON_MPIEXEC_RESOLVED_PREFLAGS}
      ${MPIEXEC_PREFLAGS} ${program} ${MPIEXEC_POSTFLAGS} ${ARGN} PARENT_SCOPE)
endfunction()

function(mpitron_add_expect_test name)
  cmake_parse_arguments(ARG "" "TARGET;NP;TIMEOUT;EXPECT_EXIT;REJECT_OUTPUT;MAX_SECONDS"
                        "ARGS;EXPECT_OUTPUT" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  _mpitron_mpiexec_command(command ${ARG_NP} ${ARG_TARGET} ${ARG_ARGS})
  string(REPLACE ";" "\\;" expect_output "${ARG_EXPECT_OUTPUT}")
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=${ARG_EXPECT_EXIT}
                   "-DEXPECT_OUTPUT=${expect_output}" "-DREJECT_OUTPUT=${ARG_REJECT_OUTPUT}"
                   -DMAX_SECONDS=${ARG_MAX_SECONDS}
                   -P ${PROJECT_SOURCE_DIR}/cmake/ExpectRun.cmake -- ${command})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} PROCESSORS ${ARG_NP})
endfunction()
