# How idle OpenMP threads wait (src/kernels/cpu/openmp_wait.cpp): spinning a while when a rank's threads
# have CPUs of their own, sleeping at once when they share them, the user's OMP_WAIT_POLICY
# untouched; and a warning when a rank's threads outnumber the CPUs it is bound to. One
# single-step train run of a tiny model each.
set(openmp_wait_train train --data /usr/share/common-licenses/GPL-3 --layers 1 --hidden 32
    --heads 2 --seq 16 --global-batch 4 --micro-batch 1 --steps 1 --eval-interval 0
    --device cpu)
find_program(MPITRON_TASKSET taskset)
cmake_host_system_information(RESULT openmp_wait_cpus QUERY NUMBER_OF_LOGICAL_CORES)
# The first CPU this process may use, for taskset.
set(openmp_wait_first_cpu 0)
if(EXISTS /proc/self/status)
  file(STRINGS /proc/self/status openmp_wait_allowed REGEX "^Cpus_allowed_list:")
  if(openmp_wait_allowed MATCHES "^Cpus_allowed_list:[ \t]*([0-9]+)")
    set(openmp_wait_first_cpu ${CMAKE_MATCH_1})
  endif()
endif()
# What the user may have set that would change the choice.
set(openmp_wait_clean_environment "OMP_WAIT_POLICY=unset:" "GOMP_SPINCOUNT=unset:"
    "OMP_PROC_BIND=unset:" "OMP_PLACES=unset:" "MPITRON_CPU_THREADS=unset:"
    "MPITRON_OPENMP_WAIT=unset:")

function(_openmp_wait_test name np)
  cmake_parse_arguments(ARG "" "" "PREFIX;ENV;ARGS;EXPECT_OUTPUT;REJECT_OUTPUT" ${ARGN})
  _mpitron_mpiexec_command(command ${np} mpitron ${openmp_wait_train} ${ARG_ARGS}
                           --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_${name})
  string(REPLACE ";" "\\;" expect_output "${ARG_EXPECT_OUTPUT}")
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=0 "-DEXPECT_OUTPUT=${expect_output}"
                   "-DREJECT_OUTPUT=${ARG_REJECT_OUTPUT}"
                   -P ${PROJECT_SOURCE_DIR}/cmake/ExpectRun.cmake -- ${ARG_PREFIX} ${command})
  set(environment ${openmp_wait_clean_environment})
  foreach(variable IN LISTS ARG_ENV)
    string(REPLACE "=" "=set:" variable "${variable}")
    list(APPEND environment "${variable}")
  endforeach()
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 PROCESSORS ${np}
                                          ENVIRONMENT_MODIFICATION "${environment}")
endfunction()

# 2 threads as --threads 2, --threads=2 or MPITRON_CPU_THREADS; the last --threads wins.
set(openmp_wait_spin "2 threads. idle threads spin 50 us, then sleep \\(2 threads x 1 rank on ")
if(MPITRON_LAUNCHER_IS_OPEN_MPI AND openmp_wait_cpus GREATER_EQUAL 2)
  # One rank, 2 threads, nothing bound (the tests' launcher flags say --bind-to none).
  _openmp_wait_test(openmp_wait_own_cores_spin 1 ARGS --threads 2
    EXPECT_OUTPUT "${openmp_wait_spin}" REJECT_OUTPUT "warning")
  _openmp_wait_test(openmp_wait_threads_equals_form 1 ARGS --threads=2
    EXPECT_OUTPUT "${openmp_wait_spin}")
  _openmp_wait_test(openmp_wait_threads_equals_then_count 1 ARGS --threads= 2
    EXPECT_OUTPUT "${openmp_wait_spin}")
  _openmp_wait_test(openmp_wait_threads_variable 1 ENV MPITRON_CPU_THREADS=2
    EXPECT_OUTPUT "${openmp_wait_spin}")
  # The variable as strtol reads it (the kernels' parser): white space (a line feed here) and a
  # '+' before the count.
  _openmp_wait_test(openmp_wait_threads_variable_signed 1 ENV "MPITRON_CPU_THREADS=\n +2"
    EXPECT_OUTPUT "${openmp_wait_spin}")
  _openmp_wait_test(openmp_wait_last_threads_wins 1 ARGS --threads 2 --threads 1
    EXPECT_OUTPUT "1 thread\\)" REJECT_OUTPUT "idle threads")
  # libgomp pins the first thread under OMP_PROC_BIND: no warning for that.
  _openmp_wait_test(openmp_wait_proc_bind_no_warning 1 ARGS --threads 2
    ENV OMP_PLACES=cores OMP_PROC_BIND=close
    EXPECT_OUTPUT "${openmp_wait_spin}" REJECT_OUTPUT "warning")
  # 2 ranks x (CPUs) threads on the host's CPUs: they share them.
  _openmp_wait_test(openmp_wait_shared_cores_sleep 2 ARGS --dp 2 --threads ${openmp_wait_cpus}
    EXPECT_OUTPUT "idle threads sleep \\(${openmp_wait_cpus} threads x 2 ranks on [0-9]+ CPUs")
  if(MPITRON_TASKSET)
    # Bound to one CPU: sleep, and the warning on the rank.
    _openmp_wait_test(openmp_wait_bound_one_cpu 1 ARGS --threads 2
      PREFIX ${MPITRON_TASKSET} -c ${openmp_wait_first_cpu}
      EXPECT_OUTPUT "idle threads sleep \\(2 threads x 1 rank on [0-9]+ CPUs, 1 of them this rank's\\)"
                    "rank 0. warning: 2 threads per rank, but this rank is bound to 1 CPU")
  endif()
  # The user's choice is left alone and named.
  _openmp_wait_test(openmp_wait_user_policy 1 ARGS --threads 2 ENV OMP_WAIT_POLICY=passive
    EXPECT_OUTPUT "2 threads. OMP_WAIT_POLICY=passive\\)" REJECT_OUTPUT "idle threads")
endif()
