# `cmake --install build --prefix P`: the mpitron command (P/bin), the four libraries and the
# CUDA module (P/lib),
# their headers (P/include/mpitron/<layer>/...) and the CMake package P/lib/cmake/mpitron, which
# exports mpitron::kernels, mpitron::autograd, mpitron::comm and mpitron::nn with their usage
# requirements (MPI, Eigen, fmt, nlohmann_json, OpenMP and CUDA are found again by
# mpitronConfig.cmake).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MPITRON_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/mpitron)
set(_mpitron_layers kernels autograd comm nn)

foreach(layer IN LISTS _mpitron_layers)
  set_target_properties(mpitron_${layer} PROPERTIES EXPORT_NAME ${layer})
  target_include_directories(mpitron_${layer}
    INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/mpitron>)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/${layer}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mpitron
          FILES_MATCHING PATTERN "*.h")
endforeach()
# The warning flags are private to mpitron's own build; the empty target only completes the
# export of the static libraries' link interface.
set_target_properties(mpitron_warnings PROPERTIES EXPORT_NAME build_warnings)

install(TARGETS mpitron_kernels mpitron_autograd mpitron_comm mpitron_nn mpitron_warnings
        EXPORT mpitronTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS mpitron RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The command finds libmpitron_kernels.so in P/lib; the CUDA module sits beside it (where the
# kernels library looks for it) and finds it there too.
set_target_properties(mpitron PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
if(TARGET mpitron_cuda)
  set_target_properties(mpitron_cuda PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS mpitron_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(EXPORT mpitronTargets NAMESPACE mpitron:: DESTINATION ${MPITRON_INSTALL_CMAKEDIR})

# OpenMP is found in src/kernels; its link line says whether it was.
get_target_property(_mpitron_kernels_links mpitron_kernels LINK_LIBRARIES)
set(MPITRON_OPENMP OFF)
if("OpenMP::OpenMP_CXX" IN_LIST _mpitron_kernels_links)
  set(MPITRON_OPENMP ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mpitronConfig.cmake.in
  ${PROJECT_BINARY_DIR}/mpitronConfig.cmake INSTALL_DESTINATION ${MPITRON_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mpitronConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mpitronConfig.cmake
              ${PROJECT_BINARY_DIR}/mpitronConfigVersion.cmake
        DESTINATION ${MPITRON_INSTALL_CMAKEDIR})
