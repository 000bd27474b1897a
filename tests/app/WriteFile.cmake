# cmake -DPATH=<file> -DTEXT=<text> -P WriteFile.cmake: writes TEXT and a newline to PATH,
# creating its folder (a test's setup step, e.g. a lock file left by another run).
get_filename_component(folder "${PATH}" DIRECTORY)
file(MAKE_DIRECTORY "${folder}")
file(WRITE "${PATH}" "${TEXT}\n")
