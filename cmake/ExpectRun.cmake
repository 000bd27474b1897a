# Runs a command and checks how it ended: a ctest driver for tests that must fail in a
# particular way (bad input, injected faults, deadlines).
#
#   cmake -DEXPECT_EXIT=<code|nonzero> [-DEXPECT_OUTPUT=<regex>[;<regex>...]]
#         [-DREJECT_OUTPUT=<regex>] [-DMAX_SECONDS=<s>]
#         [-DEXPECT_FILE=<path> -DEXPECT_FILE_OUTPUT=<regex>] -P ExpectRun.cmake -- <command> ...
#
# Fails (exit code 1) when the exit code differs, when any EXPECT_OUTPUT regex is missing from
# the combined stdout+stderr, when REJECT_OUTPUT matches it, when EXPECT_FILE (written by the
# command, e.g. a log) does not match EXPECT_FILE_OUTPUT, or when the run took longer than
# MAX_SECONDS wall-clock seconds.
set(command "")
set(after_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "ExpectRun: no command after --")
endif()

string(TIMESTAMP started "%s")
execute_process(COMMAND ${command} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP finished "%s")
math(EXPR seconds "${finished} - ${started}")
set(output "${out}${err}")
message("${output}")
message("ExpectRun: exit code ${code} after ${seconds} s")

set(failures "")
if(EXPECT_EXIT STREQUAL "nonzero")
  if(code STREQUAL "0")
    list(APPEND failures "expected a non-zero exit code, got 0")
  endif()
elseif(NOT code STREQUAL "${EXPECT_EXIT}")
  list(APPEND failures "expected exit code ${EXPECT_EXIT}, got ${code}")
endif()
# The patterns arrive as one -D value with escaped separators ("a\;b"); make them a list.
string(REPLACE "\\;" ";" EXPECT_OUTPUT "${EXPECT_OUTPUT}")
foreach(pattern IN LISTS EXPECT_OUTPUT)
  if(NOT output MATCHES "${pattern}")
    list(APPEND failures "output does not match '${pattern}'")
  endif()
endforeach()
if(REJECT_OUTPUT AND output MATCHES "${REJECT_OUTPUT}")
  list(APPEND failures "output matches rejected '${REJECT_OUTPUT}'")
endif()
if(EXPECT_FILE)
  file(READ "${EXPECT_FILE}" contents)
  if(NOT contents MATCHES "${EXPECT_FILE_OUTPUT}")
    list(APPEND failures "${EXPECT_FILE} does not match '${EXPECT_FILE_OUTPUT}'")
  endif()
endif()
if(MAX_SECONDS AND seconds GREATER MAX_SECONDS)
  list(APPEND failures "took ${seconds} s, more than ${MAX_SECONDS} s")
endif()
if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "ExpectRun failed:\n  ${text}")
endif()
