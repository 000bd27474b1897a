# Commands that only print (help, the version, arguments the parser rejects) start no MPI: a
# singleton MPI_Init forks Open MPI's runtime daemon, which costs more than the printing. The
# preloaded probe (mpi_init_probe.c) prints "mpi-init-probe: ..." when MPI_Init or
# MPI_Init_thread is called, so each run below fails on that line; the text and exit code are
# those the same command gave when it started MPI first.
add_library(mpi_init_probe MODULE mpi_init_probe.c)
target_link_libraries(mpi_init_probe PRIVATE ${CMAKE_DL_LIBS})
set(probe_environment LD_PRELOAD=$<TARGET_FILE:mpi_init_probe>)

# NAME EXIT EXPECT ARGS...: `mpitron ARGS` started by hand (no launcher: a world of one) exits
# with EXIT, prints what matches EXPECT (a regex) and calls no MPI_Init.
function(print_only_test name exit expect)
  add_test(NAME print_only_${name}
           COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=${exit} "-DEXPECT_OUTPUT=${expect}"
                   -DREJECT_OUTPUT=mpi-init-probe -DMAX_SECONDS=30
                   -P ${PROJECT_SOURCE_DIR}/cmake/ExpectRun.cmake -- $<TARGET_FILE:mpitron> ${ARGN})
  set_tests_properties(print_only_${name} PROPERTIES TIMEOUT 60
                       ENVIRONMENT "${probe_environment}")
endfunction()

print_only_test(help 0 "\nSubcommands:\n" --help)
print_only_test(train_help 0 "\nExample:\n  mpirun -np 8 mpitron train " train --help)
# The help names both model families, and where a llama checkpoint exports to.
print_only_test(help_families 0 "\n  train +Train a GPT-2 or Llama-family language model" --help)
print_only_test(train_help_families 0 "^Train a GPT-2 or Llama-family language model" train --help)
print_only_test(export_help_llama 0 "hf: Hugging Face's GPT-2 names and[ \n]+layout, or a llama checkpoint's Hugging Face Llama folder" export --help)
print_only_test(bench_comm_help 0 "\nExample:\n  mpirun [^\n]*mpitron bench comm" bench comm --help)
print_only_test(version 0 "^mpitron [^\n]+\nCUDA backend: [^\n]+\nCPU kernels: [^\n]*\nCPU GEMM: auto = [^\n]+\nMPI library: [^\n]+" --version)
# Parse errors of each kind: one line as a rank of a world of one, exit 2.
print_only_test(no_subcommand 2 "^rank 0: error: A subcommand is required \\(see --help\\)\n$")
print_only_test(unknown_subcommand 2 "^rank 0: error: unknown subcommand 'trian' \\(run mpitron --help\\)\n$" trian)
print_only_test(unknown_flag 2 "^rank 0: error: mpitron train does not take --no-such-flag \\(see mpitron train --help\\)\n$"
                train --no-such-flag)
# A subcommand's option given before the subcommand is named as such, not as one it does not take.
print_only_test(option_before_train 2 "^rank 0: error: --tp 2 was given before 'train': options go after the subcommand \\(mpitron train --tp 2 \\.\\.\\.\\)\n$"
                --tp 2 train --steps 1)
print_only_test(option_before_eval 2 "^rank 0: error: --seq=8 was given before 'eval': options go after the subcommand \\(mpitron eval --seq=8 \\.\\.\\.\\)\n$"
                --seq=8 eval --load x)
print_only_test(option_before_bench_gpt 2 "^rank 0: error: --beside-float32 was given before 'gpt': options go after the subcommand \\(mpitron bench gpt --beside-float32 \\.\\.\\.\\)\n$"
                bench --beside-float32 gpt --bf16)
# An unknown flag is named before a missing required option.
print_only_test(unknown_flag_before_required 2 "^rank 0: error: mpitron eval does not take --bogus \\(see mpitron eval --help\\)\n$"
                eval --bogus)
print_only_test(bench_gemm_takes_no_gemm 2 "^rank 0: error: mpitron bench gemm does not take --gemm eigen"
                bench gemm --gemm eigen)
print_only_test(missing_value 2 "^rank 0: error: --max-iterations needs a value \\(see --help\\)\n$"
                bench comm --max-iterations)
print_only_test(missing_required 2 "^rank 0: error: --prompt is required \\(see --help\\)\n$"
                generate --load x)
print_only_test(bad_value 2 "^rank 0: error: Could not convert: --tp = two \\(see --help\\)\n$"
                validate --tp two)
print_only_test(failed_check 2 "^rank 0: error: --max-bytes: must be an integer in \\[4, 268435456\\], got -1 \\(see --help\\)\n$"
                bench comm --max-bytes -1)
print_only_test(bench_step_option_before_comm 2
                "^rank 0: error: bench comm does not take --recompute \\(an option of bench's MLP step given before 'comm'\\)\n$"
                bench --recompute comm)

# bench schedule is pure computation: the bubble of pp 4, 2 virtual stages, 8 micro-batches
# ((pp - 1) / (v m) = 18.75 %), a layout it cannot run and one too large to simulate, without
# MPI.
print_only_test(bench_schedule 0
                "\ninterleaved v 2 +28\\.50 +18\\.75 % +18\\.75 % +15\\.8 %, 15\\.8 %, 15\\.8 %, 15\\.8 %\n"
                bench schedule)
print_only_test(bench_schedule_bad_layout 2
                "^rank 0: error: bench schedule: 2 virtual stages need micro-batches per step a multiple of pp=4, got 6\n$"
                bench schedule --micro-batches 6)
print_only_test(bench_schedule_too_large 2
                "^rank 0: error: bench schedule: pp 4 x 1000000000 virtual stages x 8 micro-batches is 6\\.4e\\+10 actions, more than the 4194304 it simulates\n$"
                bench schedule --virtual-stages 1000000000)

# Under a launcher every command is still printed once: rank 0 prints the help, the other ranks
# exit quietly, and none starts MPI.
_mpitron_mpiexec_command(print_only_launched 2 mpitron --help)
add_test(NAME print_only_help_two_ranks
         COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=0 "-DEXPECT_OUTPUT=\nSubcommands:\n"
                 "-DREJECT_OUTPUT=mpi-init-probe|Subcommands:.*Subcommands:" -DMAX_SECONDS=30
                 -P ${PROJECT_SOURCE_DIR}/cmake/ExpectRun.cmake -- ${print_only_launched})
set_tests_properties(print_only_help_two_ranks PROPERTIES TIMEOUT 60 PROCESSORS 2
                     ENVIRONMENT "${probe_environment}")

# The probe itself sees MPI start: a run that gets past the parser (and fails its own check
# after MPI_Init, as bad input of a run does) is reported.
add_test(NAME print_only_probe_sees_mpi_init
         COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=2
                 "-DEXPECT_OUTPUT=mpi-init-probe: mpitron: MPI_Init(_thread)? called\\;rank 0: error: --steps must be >= 1"
                 -DMAX_SECONDS=30 -P ${PROJECT_SOURCE_DIR}/cmake/ExpectRun.cmake --
                 $<TARGET_FILE:mpitron> bench --steps 0
                 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_print_only)
set_tests_properties(print_only_probe_sees_mpi_init PROPERTIES TIMEOUT 60
                     ENVIRONMENT "${probe_environment}")
