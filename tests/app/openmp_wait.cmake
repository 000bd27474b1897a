# How idle OpenMP threads wait (src/app/openmp_wait.cpp): spinning a while when a rank's threads
# have CPUs of their own, sleeping at once when they share them, the user's OMP_WAIT_POLICY
# untouched; and a warning when a rank's threads outnumber the CPUs it is bound to. One
# single-step train run of a tiny model each.
set(openmp_wait_train train --data /usr/share/common-licenses/GPL-3 --layers 1 --hidden 32
    --heads 2 --seq 16 --global-batch 4 --micro-batch 1 --steps 1 --eval-interval 0
    --device cpu --threads 2)
find_program(MPITRON_TASKSET taskset)
cmake_host_system_information(RESULT openmp_wait_cpus QUERY NUMBER_OF_LOGICAL_CORES)

function(_openmp_wait_test name np)
  cmake_parse_arguments(ARG "" "ENV" "PREFIX;ARGS;EXPECT_OUTPUT;REJECT_OUTPUT" ${ARGN})
  _mpitron_mpiexec_command(command ${np} mpitron ${openmp_wait_train} ${ARG_ARGS}
                           --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_${name})
  string(REPLACE ";" "\\;" expect_output "${ARG_EXPECT_OUTPUT}")
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=0 "-DEXPECT_OUTPUT=${expect_output}"
                   "-DREJECT_OUTPUT=${ARG_REJECT_OUTPUT}"
                   -P ${PROJECT_SOURCE_DIR}/cmake/ExpectRun.cmake -- ${ARG_PREFIX} ${command})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 PROCESSORS ${np})
  if(ARG_ENV)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${ARG_ENV}")
  endif()
endfunction()

if(MPITRON_LAUNCHER_IS_OPEN_MPI AND openmp_wait_cpus GREATER_EQUAL 2)
  # One rank, 2 threads, nothing bound (the tests' launcher flags say --bind-to none).
  _openmp_wait_test(openmp_wait_own_cores_spin 1
    EXPECT_OUTPUT "2 threads; idle threads spin 100 us, then sleep \\(2 threads "
    REJECT_OUTPUT "warning")
  # 2 ranks x (CPUs) threads on the host's CPUs: they share them.
  _openmp_wait_test(openmp_wait_shared_cores_sleep 2 ARGS --dp 2 --threads ${openmp_wait_cpus}
    EXPECT_OUTPUT
      "idle threads sleep \\(${openmp_wait_cpus} threads (x 2 ranks on|bound to) [0-9]+ CPUs?\\)")
  if(MPITRON_TASKSET)
    # Bound to one CPU: sleep, and the warning on the rank.
    _openmp_wait_test(openmp_wait_bound_one_cpu 1 PREFIX ${MPITRON_TASKSET} -c 0
      EXPECT_OUTPUT "idle threads sleep \\(2 threads bound to 1 CPU\\)"
                    "rank 0. warning: 2 threads per rank, but this rank is bound to 1 CPU")
  endif()
  # The user's choice is left alone and named.
  _openmp_wait_test(openmp_wait_user_policy 1 ENV OMP_WAIT_POLICY=passive
    EXPECT_OUTPUT "2 threads; OMP_WAIT_POLICY=passive\\)" REJECT_OUTPUT "idle threads")
endif()
