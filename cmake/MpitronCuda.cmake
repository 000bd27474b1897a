# Decides MPITRON_HAVE_CUDA from MPITRON_WITH_CUDA (AUTO|ON|OFF).
# AUTO enables CUDA when an nvcc and cuBLAS are found; /usr/local/cuda is searched when nvcc is
# not on PATH. ON fails the configure step when either is missing.
set(MPITRON_HAVE_CUDA OFF)
string(TOUPPER "${MPITRON_WITH_CUDA}" _mpitron_cuda_mode)
if(NOT _mpitron_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "MPITRON_WITH_CUDA must be AUTO, ON or OFF, not '${MPITRON_WITH_CUDA}'")
endif()

if(NOT _mpitron_cuda_mode STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES "${MPITRON_CUDA_ARCHITECTURES}")
    enable_language(CUDA)
    find_package(CUDAToolkit)
  endif()
  if(CMAKE_CUDA_COMPILER AND TARGET CUDA::cublas AND TARGET CUDA::cudart)
    set(MPITRON_HAVE_CUDA ON)
  elseif(_mpitron_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "MPITRON_WITH_CUDA=ON but nvcc or cuBLAS was not found")
  endif()
endif()
message(STATUS "mpitron: CUDA backend ${MPITRON_HAVE_CUDA}")

# mpitron_depend_on_cuda_module(TARGET): builds the CUDA module (when configured) before TARGET,
# so a program that may compute on a GPU finds the module it loads at run time.
function(mpitron_depend_on_cuda_module target)
  if(TARGET mpitron_cuda)
    add_dependencies(${target} mpitron_cuda)
  endif()
endfunction()
