# cmake -DMPITRON=<path> "-DCOMMAND=<words>" -P HelpScreen.cmake: `mpitron <words> --help` must
# fit on one screen (at most 60 lines of at most 100 columns; train has two families' model
# flags) and end with one example.
cmake_minimum_required(VERSION 3.20)  # empty list elements count (CMP0007): blank lines are lines
separate_arguments(words UNIX_COMMAND "${COMMAND}")
execute_process(COMMAND ${MPITRON} ${words} --help RESULT_VARIABLE code OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "mpitron ${COMMAND} --help exited with ${code}: ${err}")
endif()
string(REGEX REPLACE "\n$" "" out "${out}")
# The lines become a list: a ';' would split a line in two, and '[', ']' or a '\' at a line's
# end would join lines (CMake keeps ';' inside brackets), so they are escaped or stood in for
# by characters of the same width.
string(REPLACE "\\" "/" out "${out}")
string(REPLACE "[" "{" out "${out}")
string(REPLACE "]" "}" out "${out}")
string(REPLACE ";" "\\;" out "${out}")
string(REPLACE "\n" ";" lines "${out}")
list(LENGTH lines count)
if(count GREATER 60)
  message(FATAL_ERROR "mpitron ${COMMAND} --help has ${count} lines (at most 60)")
endif()
foreach(line IN LISTS lines)
  string(LENGTH "${line}" width)
  if(width GREATER 100)
    message(FATAL_ERROR "mpitron ${COMMAND} --help has a line of ${width} columns: ${line}")
  endif()
endforeach()
list(GET lines -2 example_heading)
list(GET lines -1 example)
if(NOT example_heading STREQUAL "Example:" OR NOT example MATCHES "^  (mpirun .*)?mpitron ")
  message(FATAL_ERROR "mpitron ${COMMAND} --help does not end with one example:\n${out}")
endif()
message(STATUS "mpitron ${COMMAND} --help: ${count} lines")
