# cmake -DCLANG_FORMAT=<program> -DSTYLE_FILE=<.clang-format> -DDIRS=<dir>[|<dir>...]
#       -P ClangFormatCheck.cmake
# Runs `clang-format --dry-run -Werror` with STYLE_FILE's style over every C++ and CUDA file
# under DIRS (listed when the test runs, so new files are covered without reconfiguring).
# Fails, printing clang-format's diagnostics, when any file would change.
set(files)
string(REPLACE "|" ";" DIRS "${DIRS}")
foreach(dir IN LISTS DIRS)
  file(GLOB_RECURSE found ${dir}/*.h ${dir}/*.hpp ${dir}/*.cpp ${dir}/*.cu ${dir}/*.cuh)
  list(APPEND files ${found})
endforeach()
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "clang-format check: no C++ files under ${DIRS}")
endif()
execute_process(COMMAND ${CLANG_FORMAT} --dry-run -Werror --style=file:${STYLE_FILE} ${files}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "clang-format check: the files named above differ from their "
                      "clang-format; run clang-format -i on them")
endif()
message("clang-format check: ${count} files formatted")
