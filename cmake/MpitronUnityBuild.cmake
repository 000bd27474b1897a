# mpitron_unity_build(<target> <batches>): compiles <target>'s C++ sources as <batches> unity
# translation units when MPITRON_UNITY_BUILD is ON (the default). Most of a translation unit's
# compile time goes to parsing and optimising the same heavy headers (CLI11, spdlog/fmt,
# nlohmann-json, the standard library); a unity unit does that once for its whole batch.
# <batches> is chosen so that two cores stay busy; docs/performance.md has the measurements.
function(mpitron_unity_build target batches)
  if(NOT MPITRON_UNITY_BUILD)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  list(FILTER sources INCLUDE REGEX "\\.cpp$")
  list(LENGTH sources count)
  math(EXPR batch_size "(${count} + ${batches} - 1) / ${batches}")
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${batch_size})
endfunction()
