# GPT-2-shaped training from an llm.c model file against a PyTorch golden (gpt2_golden_check.py,
# after checkpoint.cmake, whose launcher it uses): tools/make_gpt2_golden.py writes the model
# file and the token shard (standard library only), and each topology's five AdamW steps, final
# validation loss and exported weights must match tests/data/gpt2_golden.json and
# gpt2_golden_final.bin (torch in float64) within 1e-5 relative.
set(gpt2_golden_work ${CMAKE_CURRENT_BINARY_DIR}/gpt2_golden)
add_test(NAME gpt2_golden_inputs
         COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/tools/make_gpt2_golden.py inputs
                 ${gpt2_golden_work}/inputs)
set_tests_properties(gpt2_golden_inputs PROPERTIES FIXTURES_SETUP gpt2_golden)

# NAME TP PP DP [args of gpt2_golden_check.py]: one topology's run against the golden.
function(gpt2_golden_test name tp pp dp)
  math(EXPR np "${tp} * ${pp} * ${dp}")
  add_test(NAME ${name}
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/gpt2_golden_check.py
                   --golden ${PROJECT_SOURCE_DIR}/tests/data/gpt2_golden.json
                   --inputs ${gpt2_golden_work}/inputs --at ${tp},${pp},${dp} ${ARGN}
                   --work ${gpt2_golden_work}/${name} -- ${ckpt_launch})
  set_tests_properties(${name} PROPERTIES TIMEOUT 180 PROCESSORS ${np}
                       FIXTURES_REQUIRED gpt2_golden)
endfunction()

gpt2_golden_test(gpt2_golden_np1 1 1 1)
gpt2_golden_test(gpt2_golden_tp2_pp2 2 2 1)
gpt2_golden_test(gpt2_golden_tp2_dp2 2 1 2)
# The comparison can fail: the exact GELU instead of GPT-2's tanh form must not match.
gpt2_golden_test(gpt2_golden_detects_erf_gelu 1 1 1 --perturb "--gelu erf" --expect-mismatch)
