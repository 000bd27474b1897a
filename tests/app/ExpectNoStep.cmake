# cmake -DDIR=<checkpoint folder> -P ExpectNoStep.cmake: fails when DIR holds a step_<k> folder
# or a latest file (a step that must not have been saved was), or a temporary file of a save.
file(GLOB saved "${DIR}/step_*" "${DIR}/latest" "${DIR}/.*.tmp.*")
if(saved)
  message(FATAL_ERROR "${DIR} holds ${saved}")
endif()
