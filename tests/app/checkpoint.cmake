# Checkpoints through the real CLI (issue 12): resume on the same and on other topologies,
# `eval` against the PyTorch peer and across topologies, `generate` on any topology, and damaged
# checkpoints. checkpoint_cli.py runs mpitron through the test launcher and compares the numbers;
# tests/data/checkpoint_tiny is a committed (2, 2, 1) checkpoint (tools/make_checkpoint_golden.py).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(ckpt_work ${CMAKE_CURRENT_BINARY_DIR}/checkpoint)
set(ckpt_tiny ${PROJECT_SOURCE_DIR}/tests/data/checkpoint_tiny)
set(ckpt_text ${PROJECT_SOURCE_DIR}/tests/data/checkpoint_eval.txt)
_mpitron_mpiexec_command(ckpt_launch "{np}" mpitron)

# NAME NP [args of checkpoint_cli.py]: one driver run as a test using up to NP ranks at a time.
function(checkpoint_cli_test name np)
  add_test(NAME ${name}
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_cli.py ${ARGN}
                   --work ${ckpt_work}/${name} -- ${ckpt_launch})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 PROCESSORS ${np})
endfunction()

# Resume: bit-identical on the same topology; within 1e-5 on another one or micro-batch count.
checkpoint_cli_test(checkpoint_resume_same_tp2_pp2_dp2 8 resume --from 2,2,2 --to 2,2,2 --rtol 0)
checkpoint_cli_test(checkpoint_resume_same_np1 1 resume --from 1,1,1 --to 1,1,1 --rtol 0)
foreach(run "tp2_pp2_dp1|2,2,1|tp1_pp1_dp1|1,1,1" "tp1_pp1_dp1|1,1,1|tp2_pp2_dp2|2,2,2"
            "tp2_pp1_dp2|2,1,2|tp1_pp2_dp2|1,2,2")
  string(REPLACE "|" ";" fields "${run}")
  list(GET fields 0 from_name)
  list(GET fields 1 from)
  list(GET fields 2 to_name)
  list(GET fields 3 to)
  checkpoint_cli_test(checkpoint_resume_${from_name}_to_${to_name} 8
                      resume --from ${from} --to ${to} --rtol 1e-5)
endforeach()
checkpoint_cli_test(checkpoint_resume_micro_batch_2_to_4 4
                    resume --from 1,2,2 --to 2,1,1 --to-micro-batch 4 --rtol 1e-5)

# eval: the PyTorch peer's number for the committed checkpoint (1e-4: float32 sums in two
# implementations), the same number on every topology (1e-5), also for a (1, 2, 2)-saved one.
checkpoint_cli_test(checkpoint_eval_peer_golden 4
                    eval --load ${ckpt_tiny} --data ${ckpt_text} --at 1,1,1 --at 2,2,1
                    --golden ${PROJECT_SOURCE_DIR}/tests/data/checkpoint_golden.json --rtol 1e-4)
checkpoint_cli_test(checkpoint_eval_peer_golden_seq5 1
                    eval --load ${ckpt_tiny} --data ${ckpt_text} --seq 5 --at 1,1,1
                    --golden ${PROJECT_SOURCE_DIR}/tests/data/checkpoint_golden.json --rtol 1e-4)
checkpoint_cli_test(checkpoint_eval_topologies 2
                    eval --load ${ckpt_tiny} --data ${ckpt_text} --at 1,1,1 --at 2,1,1 --at 1,2,1
                    --rtol 1e-5)
checkpoint_cli_test(checkpoint_eval_saved_tp1_pp2_dp2 4
                    eval --train-at 1,2,2 --data ${ckpt_text} --at 1,2,2 --at 2,1,1 --at 1,1,1
                    --rtol 1e-5)

# generate: the same text on tp 1, 2 and 4 and twice, sampled and greedy; another for another seed.
checkpoint_cli_test(checkpoint_generate_topologies 4 generate --load ${ckpt_tiny})

# Damaged checkpoints: copies of the committed one with one defect each (a fixture), then one
# line naming the file and what differs on every rank, exit code 2, through each subcommand.
add_test(NAME checkpoint_damage_setup
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_cli.py damage
                 --load ${ckpt_tiny} --work ${ckpt_work}/damaged)
set_tests_properties(checkpoint_damage_setup PROPERTIES FIXTURES_SETUP checkpoint_damaged)
set(bad ${ckpt_work}/damaged)
set(step_dir step_1000)
set(eval_args --data ${ckpt_text})
set(generate_args --prompt x --tokens 1)
set(export_args --out ${ckpt_work}/damaged/out.safetensors)
set(train_args --layers 2 --hidden 16 --heads 4 --seq 16 --steps 1001 --optimizer sgd)
# name|subcommand|checkpoint|message regex (after "<checkpoint>/"; brackets balanced, as CMake
# lists need)
set(damage_runs
  "bad_header|eval|bad_header|${step_dir}/shard_tp0_pp1\\.safetensors: bad JSON header"
  "short_data|generate|short_data|${step_dir}/shard_tp1_pp1\\.safetensors: short data: tensor '[^']+' needs data bytes .[0-9]+, [0-9]+\\) but the file holds [0-9]+"
  "wrong_dtype|export|wrong_dtype|${step_dir}/shard_tp1_pp0\\.safetensors: tensor 'transformer\\.h\\.0\\.mlp\\.c_fc\\.weight' is F64 but the model wants F32"
  "wrong_shape|train|wrong_shape|${step_dir}/shard_tp0_pp0\\.safetensors: tensor 'transformer\\.wte\\.weight' has shape \\[64, 32\\] but the model wants \\[128, 16\\] \\(full shape \\[256, 16\\] over tp 2\\)"
  "missing_shard|eval|missing_shard|${step_dir}/shard_tp1_pp1\\.safetensors: missing shard file"
  "no_done|train|no_done|: no complete checkpoint step \\(no DONE marker\\)"
  "no_done_eval|eval|no_done|: no complete checkpoint step \\(no DONE marker\\)")
foreach(run IN LISTS damage_runs)
  string(REPLACE "|" ";" fields "${run}")
  list(GET fields 0 name)
  list(GET fields 1 command)
  list(GET fields 2 checkpoint)
  list(GET fields 3 message)
  mpitron_add_expect_test(checkpoint_bad_${name} TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
    ARGS ${command} --tp 2 --load ${bad}/${checkpoint} ${${command}_args}
         --log-dir ${ckpt_work}/logs_bad
    EXPECT_EXIT 2
    EXPECT_OUTPUT "rank 0: error: [^\n]*${checkpoint}/?${message}"
                  "rank 1: error: [^\n]*${checkpoint}/?${message}")
  set_tests_properties(checkpoint_bad_${name} PROPERTIES FIXTURES_REQUIRED checkpoint_damaged)
endforeach()
# A newer step without DONE (latest names it, a shard is truncated) is never loaded: eval uses
# the complete step before it.
mpitron_add_expect_test(checkpoint_newer_step_without_done TARGET mpitron NP 2 TIMEOUT 60
  MAX_SECONDS 30
  ARGS eval --tp 2 --load ${bad}/newer_without_done ${eval_args} --log-dir ${ckpt_work}/logs_bad
  EXPECT_EXIT 0 EXPECT_OUTPUT "eval: [^\n]*newer_without_done step 1000 on" REJECT_OUTPUT "error")
set_tests_properties(checkpoint_newer_step_without_done
                     PROPERTIES FIXTURES_REQUIRED checkpoint_damaged)
# Other model sizes, and AdamW from a checkpoint without moments (the committed one is SGD's).
mpitron_add_expect_test(checkpoint_bad_model_sizes TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train --tp 2 --load ${ckpt_tiny} --layers 2 --hidden 32 --heads 4 --seq 16 --steps 1001
       --optimizer sgd --log-dir ${ckpt_work}/logs_bad
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: --load [^\n]*checkpoint_tiny: the checkpoint has hidden 16, this run 32"
                "rank 1: error: --load [^\n]*checkpoint_tiny: the checkpoint has hidden 16, this run 32")
mpitron_add_expect_test(checkpoint_bad_no_moments TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train --tp 2 --load ${ckpt_tiny} --layers 2 --hidden 16 --heads 4 --seq 16 --steps 1001
       --log-dir ${ckpt_work}/logs_bad
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: [^\n]*checkpoint_tiny/step_1000/meta\\.json: the checkpoint holds no AdamW moments"
                "rank 1: error: [^\n]*meta\\.json: the checkpoint holds no AdamW moments")
