# Checkpoints through the real CLI: resume on the same and on other topologies,
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
# Interleaved 1F1B: a run saved without it resumes with 2 virtual stages, and one saved with them
# resumes on one rank (block names are global, so checkpoints know no chunks).
checkpoint_cli_test(checkpoint_resume_tp2_pp2_dp1_to_virtual_stages_2 4
                    resume --from 2,2,1 --to 2,2,1 --layers 4 --to-virtual-stages 2 --rtol 1e-5)
checkpoint_cli_test(checkpoint_resume_virtual_stages_2_tp1_pp2_dp1_to_tp1_pp1_dp1 2
                    resume --from 1,2,1 --from-virtual-stages 2 --to 1,1,1 --layers 4 --rtol 1e-5)
# --bf16: bit-identical on the same topology (the checkpoint holds the float32 masters and
# moments); resharded, and float32 <-> bf16 in both directions, within 1e-3 (measured 1.2e-5
# resharded onto pp 2, whose stages exchange bfloat16, 1.7e-5 float32 -> bf16, 9.2e-6 bf16 ->
# float32: the bf16 and float32 curves differ by that much).
checkpoint_cli_test(checkpoint_resume_bf16_same_tp2_pp1_dp2 4
                    resume --from 2,1,2 --to 2,1,2 --bf16 all --rtol 0)
# At pp 2 the stages exchange bfloat16: the same roundings again after the resume.
checkpoint_cli_test(checkpoint_resume_bf16_same_tp1_pp2_dp1 2
                    resume --from 1,2,1 --to 1,2,1 --bf16 all --rtol 0)
checkpoint_cli_test(checkpoint_resume_bf16_tp2_pp1_dp2_to_tp1_pp2_dp1 4
                    resume --from 2,1,2 --to 1,2,1 --bf16 all --rtol 1e-3)
checkpoint_cli_test(checkpoint_resume_float32_to_bf16 2
                    resume --from 1,2,1 --to 2,1,1 --bf16 resumed --rtol 1e-3)
checkpoint_cli_test(checkpoint_resume_bf16_to_float32 2
                    resume --from 2,1,1 --to 1,1,2 --bf16 not-resumed --rtol 1e-3)
# The llama family: bit-identical on the same topology, and resharded within 1e-5 as GPT-2.
checkpoint_cli_test(checkpoint_resume_llama_same_tp2_pp2_dp1 4
                    resume --from 2,2,1 --to 2,2,1 --llama --rtol 0)
checkpoint_cli_test(checkpoint_resume_llama_tp2_pp2_dp1_to_tp1_pp1_dp2 4
                    resume --from 2,2,1 --to 1,1,2 --llama --rtol 1e-5)
# --recompute on only the stopped or only the resumed run: the same losses bit for bit.
checkpoint_cli_test(checkpoint_resume_recompute_stopped_tp1_pp2_dp2 4
                    resume --from 1,2,2 --to 1,2,2 --recompute stopped --rtol 0)
checkpoint_cli_test(checkpoint_resume_recompute_resumed_tp2_pp1_dp1 2
                    resume --from 2,1,1 --to 2,1,1 --recompute resumed --rtol 0)
# The distributed optimizer saves whole moments: a dp-4 run with it resumes at dp 1 without it,
# and a run saved without it resumes with it (pp 2: the tied embedding's own bucket).
checkpoint_cli_test(checkpoint_resume_distributed_optimizer_dp4_to_dp1 4
                    resume --from 1,1,4 --to 1,1,1 --distributed-optimizer stopped --rtol 1e-5)
checkpoint_cli_test(checkpoint_resume_tp2_pp2_dp1_to_distributed_optimizer_pp2_dp2 4
                    resume --from 2,2,1 --to 1,2,2 --distributed-optimizer resumed --rtol 1e-5)
# --sequence-parallel on only the resumed run, from a checkpoint saved without it: the
# uninterrupted run's losses within 1e-5 (the sums over TP run in another order).
checkpoint_cli_test(checkpoint_resume_sequence_parallel_resumed_tp2_pp1_dp1 2
                    resume --from 2,1,1 --to 2,1,1 --sequence-parallel resumed --rtol 1e-5)
checkpoint_cli_test(checkpoint_resume_sequence_parallel_resumed_tp1_pp1_dp1_to_tp2_pp2_dp2 8
                    resume --from 1,1,1 --to 2,2,2 --sequence-parallel resumed --rtol 1e-5)

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
# eval --bf16: a `train --bf16` run's final val_loss, bit for bit, from its checkpoint over its
# validation bytes on its topology (the same trainer and windows: the same sums in the same
# order), and not without --bf16; on other topologies within 1e-3, since the bfloat16 TP partial
# sums and PP sends round at other places (measured: see docs/precision.md). generate --bf16:
# the same greedy text twice and from the bfloat16 export.
checkpoint_cli_test(checkpoint_eval_bf16_val_loss_tp2_pp2_dp1 4
                    eval-bf16 --data ${ckpt_text} --train-at 2,2,1 --at 1,1,1 --at 2,1,2
                    --rtol 1e-3)
checkpoint_cli_test(checkpoint_eval_bf16_val_loss_tp1_pp1_dp2 2
                    eval-bf16 --data ${ckpt_text} --train-at 1,1,2 --at 2,1,1 --rtol 1e-3)
# Ranks that disagree on --bf16 (an MPMD launch giving it to rank 0 only for eval, rank 1 only
# for generate) are refused at start-up by the agreement, one line on every rank, exit code 2.
foreach(case "eval|--data,${ckpt_text},--dp,2|bf16=true|bf16=false"
             "generate|--prompt,x,--tokens,3,--tp,2|bf16=false|bf16=true")
  string(REPLACE "|" ";" fields "${case}")
  list(GET fields 0 subcommand)
  list(GET fields 1 extra)
  string(REPLACE "," ";" extra "${extra}")
  list(GET fields 2 first)
  list(GET fields 3 second)
  set(rank_args ${subcommand} --load ${ckpt_tiny} ${extra} --log-dir ${ckpt_work}/logs_bf16_agree)
  set(flag0 "")
  set(flag1 "")
  if(first STREQUAL "bf16=true")
    set(flag0 --bf16)
  else()
    set(flag1 --bf16)
  endif()
  set(differs "configuration differs between ranks: rank 0 runs [^\n]*${first}[^\n]*rank 1 runs [^\n]*${second}")
  add_test(NAME checkpoint_${subcommand}_bf16_ranks_disagree
           COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=2
                   "-DEXPECT_OUTPUT=rank 0: error: ${differs}\\;rank 1: error: ${differs}"
                   -DMAX_SECONDS=30 -P ${PROJECT_SOURCE_DIR}/cmake/ExpectRun.cmake --
                   ${MPIEXEC_EXECUTABLE} ${MPITRON_MPIEXEC_RESOLVED_PREFLAGS}
                   -n 1 $<TARGET_FILE:mpitron> ${rank_args} ${flag0} :
                   -n 1 $<TARGET_FILE:mpitron> ${rank_args} ${flag1})
  set_tests_properties(checkpoint_${subcommand}_bf16_ranks_disagree PROPERTIES TIMEOUT 60
                       PROCESSORS 2)
endforeach()

# generate: the same text on tp 1, 2 and 4 and twice, sampled and greedy; another for another seed.
checkpoint_cli_test(checkpoint_generate_topologies 4 generate --load ${ckpt_tiny})

# Damaged checkpoints: copies of the committed one with one defect each (a fixture), then one
# line naming the file and what differs on every rank, exit code 2, through each subcommand.
add_test(NAME checkpoint_damage_setup
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_cli.py damage
                 --load ${ckpt_tiny} --work ${ckpt_work}/damaged)
set_tests_properties(checkpoint_damage_setup PROPERTIES FIXTURES_SETUP checkpoint_damaged)
set(bad ${ckpt_work}/damaged)
set(args_eval --data ${ckpt_text})
set(args_generate --prompt x --tokens 1)
set(args_export --out ${bad}/out.safetensors)
set(args_train --layers 2 --hidden 16 --heads 4 --seq 16 --steps 1001 --optimizer sgd)

# NAME SUBCOMMAND CASE FILE MESSAGE: `SUBCOMMAND --load <damaged>/CASE` on 2 ranks (tp 2) must end
# with the line "rank r: error: <damaged>/CASE/FILE: MESSAGE" on both ranks (FILE and MESSAGE
# literal; a MESSAGE ending in "..." is only the start of the line).
function(checkpoint_bad_test name subcommand case file message)
  set(end "\n")
  if(message MATCHES "\\.\\.\\.$")
    string(REGEX REPLACE "\\.\\.\\.$" "" message "${message}")
    set(end "")
  endif()
  # Escaped for a regex; a bracket (any character here) would break the pattern list's splitting.
  string(REGEX REPLACE "([().*+])" "\\\\\\1" line "${case}${file}: ${message}")
  string(REGEX REPLACE "[][]" "." line "${line}")
  mpitron_add_expect_test(checkpoint_bad_${name} TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
    ARGS ${subcommand} --tp 2 --load ${bad}/${case} ${args_${subcommand}}
         --log-dir ${ckpt_work}/logs_bad
    EXPECT_EXIT 2
    EXPECT_OUTPUT "rank 0: error: [^\n]*/${line}${end}" "rank 1: error: [^\n]*/${line}${end}")
  set_tests_properties(checkpoint_bad_${name} PROPERTIES FIXTURES_REQUIRED checkpoint_damaged)
endfunction()
set(shard /step_1000/shard_tp)
checkpoint_bad_test(bad_header_json eval bad_header_json ${shard}0_pp1.safetensors
  "bad JSON header: ...")
checkpoint_bad_test(bad_header_length export bad_header_length ${shard}1_pp0.safetensors
  "header length 1000000 is beyond the file (18520 bytes)")
checkpoint_bad_test(short_data generate short_data ${shard}1_pp1.safetensors
  "short data: tensor 'transformer.ln_f.bias' needs data bytes [6816, 6880) but the file holds 6876")
checkpoint_bad_test(wrong_dtype export wrong_dtype ${shard}1_pp0.safetensors
  "tensor 'transformer.h.0.mlp.c_fc.weight' is F64 but the model wants F32")
checkpoint_bad_test(wrong_shape train wrong_shape ${shard}0_pp0.safetensors
  "tensor 'transformer.wte.weight' has shape [64, 32] but the model wants [128, 16] (full shape [256, 16] over tp 2)")
checkpoint_bad_test(missing_shard eval missing_shard ${shard}1_pp1.safetensors "missing shard file")
checkpoint_bad_test(nan_value eval nan_value /step_1000
  "tensor transformer.ln_f.weight holds nan at element 2")
# A finite checkpoint whose loss overflows: eval says so on every rank and exits 1, as train does.
mpitron_add_expect_test(checkpoint_eval_loss_overflows TARGET mpitron NP 2 TIMEOUT 60
  MAX_SECONDS 30
  ARGS eval --tp 2 --load ${bad}/overflow ${args_eval} --log-dir ${ckpt_work}/logs_bad
  EXPECT_EXIT 1
  EXPECT_OUTPUT "rank 0: error: eval: the loss of [^\n]*overflow step 1000 on [^\n]* is NaN: "
                "rank 1: error: eval: the loss of "
  REJECT_OUTPUT "nats per")
set_tests_properties(checkpoint_eval_loss_overflows PROPERTIES FIXTURES_REQUIRED checkpoint_damaged)
# export's --out: a folder, or a file in a folder that does not exist.
foreach(out "folder|${ckpt_work}|is a folder"
            "missing|${ckpt_work}/no-such-folder/m.safetensors|cannot write into the folder [^\n]*no-such-folder: No such file or directory")
  string(REPLACE "|" ";" fields "${out}")
  list(GET fields 0 name)
  list(GET fields 1 path)
  list(GET fields 2 message)
  mpitron_add_expect_test(checkpoint_bad_export_out_${name} TARGET mpitron NP 1 TIMEOUT 60
    ARGS export --load ${ckpt_tiny} --out ${path} --log-dir ${ckpt_work}/logs_bad
    EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: --out [^\n]*${message}")
endforeach()
checkpoint_bad_test(no_folder generate no_such_folder "" "no such checkpoint folder")
foreach(subcommand train eval)
  checkpoint_bad_test(no_done_${subcommand} ${subcommand} no_done /step_1000
    "incomplete checkpoint (no DONE marker), and no other step is complete")
endforeach()
# A newer step without DONE (latest names it, a shard is truncated) is never loaded: eval uses
# the complete step before it.
mpitron_add_expect_test(checkpoint_newer_step_without_done TARGET mpitron NP 2 TIMEOUT 60
  MAX_SECONDS 30
  ARGS eval --tp 2 --load ${bad}/newer_without_done ${args_eval} --log-dir ${ckpt_work}/logs_bad
  EXPECT_EXIT 0 EXPECT_OUTPUT "eval: [^\n]*newer_without_done step 1000 on" REJECT_OUTPUT "error")
set_tests_properties(checkpoint_newer_step_without_done
                     PROPERTIES FIXTURES_REQUIRED checkpoint_damaged)
# Other model sizes, and AdamW from a checkpoint without moments (the committed one is SGD's).
set(sizes_message "checkpoint_tiny: the checkpoint has hidden 16, this run 32")
mpitron_add_expect_test(checkpoint_bad_model_sizes TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train --tp 2 --load ${ckpt_tiny} --layers 2 --hidden 32 --heads 4 --seq 16 --steps 1001
       --optimizer sgd --log-dir ${ckpt_work}/logs_bad
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: --load [^\n]*/${sizes_message}\n"
                "rank 1: error: --load [^\n]*/${sizes_message}\n")
set(moments_message "checkpoint_tiny/step_1000/meta\\.json: the checkpoint holds no AdamW moments")
mpitron_add_expect_test(checkpoint_bad_no_moments TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train --tp 2 --load ${ckpt_tiny} --layers 2 --hidden 16 --heads 4 --seq 16 --steps 1001
       --log-dir ${ckpt_work}/logs_bad
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: [^\n]*/${moments_message}\n"
                "rank 1: error: [^\n]*/${moments_message}\n")
