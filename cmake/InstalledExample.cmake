# cmake -DBUILD_DIR=... -DPREFIX=... -DEXAMPLE=... -DWORK=... [-DCXX=...] [-DLAUNCHER=...]
#       -DEXPECT_OUTPUT=regex -P InstalledExample.cmake -- <mpiexec command line ...>
# Installs BUILD_DIR into PREFIX, configures and builds the standalone project EXAMPLE in WORK
# against it (find_package(mpitron)), then runs the command after `--` with the example's
# executable, named like its folder, appended. Fails on any step's error, a non-zero exit or
# output that does not match EXPECT_OUTPUT.
cmake_policy(SET CMP0007 NEW)
set(command)
set(after_dashes OFF)
foreach(i RANGE ${CMAKE_ARGC})
  if(after_dashes)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(after_dashes ON)
  endif()
endforeach()
list(FILTER command EXCLUDE REGEX "^$")

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${PREFIX} ${WORK})
step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
set(configure_flags -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release)
if(CXX)
  list(APPEND configure_flags -DCMAKE_CXX_COMPILER=${CXX})
endif()
if(LAUNCHER)
  list(APPEND configure_flags -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
step("configuring ${EXAMPLE}" ${CMAKE_COMMAND} -S ${EXAMPLE} -B ${WORK} ${configure_flags})
step("building ${EXAMPLE}" ${CMAKE_COMMAND} --build ${WORK})
get_filename_component(name ${EXAMPLE} NAME)
step("running ${name}" ${command} ${WORK}/${name})
message("${step_output}")
if(NOT step_output MATCHES "${EXPECT_OUTPUT}")
  message(FATAL_ERROR "${name}: the output does not match '${EXPECT_OUTPUT}'")
endif()
