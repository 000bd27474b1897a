# Other tools' GPT-2 formats through the real CLI (gpt2_formats_cli.py, after checkpoint.cmake,
# whose launcher and committed checkpoint it uses): `export --format safetensors|hf|llmc` of the
# committed checkpoint hold the same numbers under each tool's names and layout.
set(gpt2_work ${CMAKE_CURRENT_BINARY_DIR}/gpt2_formats)

# NAME NP [args of gpt2_formats_cli.py]: one driver run as a test using up to NP ranks at a time.
function(gpt2_formats_test name np)
  add_test(NAME ${name}
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/gpt2_formats_cli.py ${ARGN}
                   --work ${gpt2_work}/${name} -- ${ckpt_launch})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 PROCESSORS ${np})
endfunction()

gpt2_formats_test(gpt2_formats_exports 1 exports --load ${ckpt_tiny})
