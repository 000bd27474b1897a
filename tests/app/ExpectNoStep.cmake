# cmake -DDIR=<checkpoint folder> -P ExpectNoStep.cmake: fails when DIR holds a step_<k> folder
# or a latest file (a step that must not have been saved was), a temporary file of a save, or
# the lock (the run that ended left the folder held).
file(GLOB saved "${DIR}/step_*" "${DIR}/latest" "${DIR}/.*.tmp.*" "${DIR}/.lock")
if(saved)
  message(FATAL_ERROR "${DIR} holds ${saved}")
endif()
