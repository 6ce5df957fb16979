/*
 * cuda_skips.h: the tests of test_list.h that do not run on the CUDA backend (VRAM_TEST_BACKEND=cuda,
 * over tests/shim's fake libcuda.so.1: ctest's vram_cuda.*), each with the reason; harness.c skips
 * them there and says why. Every other test runs on both backends: use_sim() gives the fake driver
 * the same cards, fill/filled and block_tag/block_tagged keep a shadow of device memory there, and
 * the simulated backend's hooks (vram__sim_*) act on the fake driver (harness.h). A test belongs here
 * only when it checks something of the simulated backend itself, or needs device memory to be host
 * memory; test_cuda.c checks the driver's side of the same.
 */
#ifndef VRAM_TESTS_CUDA_SKIPS_H
#define VRAM_TESTS_CUDA_SKIPS_H

#define CUDA_SKIP_SIM_FAIL_ALLOC                                                                    \
    "VRAM_SIM_FAIL_ALLOC_AFTER is the simulated driver's (test_cuda.c's cuda_driver_fail_* make the " \
    "fake driver's cuMemAlloc / cuMemCreate fail instead)"
#define CUDA_SKIP_HOST_BYTES                                                                        \
    "reads and writes blocks through plain host pointers (device memory is host memory on the "     \
    "simulated card only; test_cuda.c's cuda_ipc_* share memory through the driver)"

#define CUDA_SKIP_OFFLOAD                                                                           \
    "checks the bytes an offload keeps or a discard loses through host pointers, or fails copies on " \
    "demand: the fake driver's device memory holds no bytes, its copies (cuMemcpyDtoH_v2, "          \
    "cuMemcpyHtoD_v2) move none, and only the simulated card fails them (vram__sim_fail_copies)"

/* clang-format off */
#define CUDA_SKIPS(X) \
    /* test_sleep.c */ \
    X(sleep_offload_wakes_at_the_same_addresses_with_the_bytes, CUDA_SKIP_OFFLOAD) \
    X(sleep_discard_wakes_without_the_bytes, CUDA_SKIP_OFFLOAD) \
    X(sleep_copies_a_run_of_blocks_at_once, CUDA_SKIP_OFFLOAD) \
    X(sleep_wake_refused_by_the_limit_keeps_everything_asleep, CUDA_SKIP_OFFLOAD) \
    X(sleep_wake_refused_by_the_card_undoes_its_mappings, \
      "a forked process takes memory of the simulated card straight from the simulated driver " \
      "(VRAM_SIM_SHARED); the fake's FAKE_CUDA_SHARED entry of a forked child is its parent's") \
    X(sleep_offload_keeps_its_pinned_host_block_for_the_next_sleep, CUDA_SKIP_OFFLOAD) \
    X(sleep_offload_host_copy_goes_with_the_last_block, CUDA_SKIP_OFFLOAD) \
    X(sleep_private_pool_of_a_tag_wakes_whole, CUDA_SKIP_OFFLOAD) \
    X(sleep_failed_copies_change_nothing, CUDA_SKIP_OFFLOAD) \
    X(sleep_trim_and_idle_release_leave_a_tag_asleep, CUDA_SKIP_OFFLOAD) \
    X(sleep_failed_in_a_later_arena_wakes_the_earlier_ones, CUDA_SKIP_OFFLOAD) \
    /* test_physical.c */ \
    X(physical_names_and_properties, \
      "the simulated cards' names and PCI bus ids (test_cuda.c's cuda_listing checks the driver's)") \
    X(physical_cuda_visible_devices_uuid_and_end_of_list, \
      "the simulated backend's reading of CUDA_VISIBLE_DEVICES (the fake driver reads card indices only)") \
    /* test_oom.c */ \
    X(oom_card_full_names_driver_error, CUDA_SKIP_SIM_FAIL_ALLOC) \
    X(oom_card_full_counts_no_other_process, CUDA_SKIP_SIM_FAIL_ALLOC) \
    X(oom_card_full_shared_by_two_logical_devices, CUDA_SKIP_SIM_FAIL_ALLOC) \
    /* test_alloc.c */ \
    X(alloc_blocks_are_usable_memory, CUDA_SKIP_HOST_BYTES) \
    /* test_driver_fail.c */ \
    X(driver_fail_mid_growth, CUDA_SKIP_SIM_FAIL_ALLOC) \
    X(driver_fail_mid_growth_several_logical_devices, CUDA_SKIP_SIM_FAIL_ALLOC) \
    X(driver_fail_at_start_without_growth, CUDA_SKIP_SIM_FAIL_ALLOC) \
    X(driver_fail_at_start_of_second_logical_device, CUDA_SKIP_SIM_FAIL_ALLOC) \
    X(driver_fail_at_start_with_growth_is_fine, CUDA_SKIP_SIM_FAIL_ALLOC) \
    /* test_env.c */ \
    X(env_sim_devices_bad_values, "VRAM_SIM_DEVICES is the simulated backend's variable") \
    X(env_sim_fail_alloc_after_bad_value, "VRAM_SIM_FAIL_ALLOC_AFTER is the simulated backend's variable") \
    X(env_backend_sim, "checks VRAM_BACKEND=sim itself") \
    /* test_plan.c */ \
    X(plan_slots_block_shared_by_ipc, \
      "reads a block through its IPC mapping at another address (the shadow of device memory on the CUDA " \
      "backend knows addresses, not the memory behind them)") \
    /* test_faults.c */ \
    X(faults_sizes_and_fractions_ignore_the_locale, \
      "the parsing of sizes under a decimal-comma locale: it reaches the driver as on the simulated backend, " \
      "and localedef makes it the slowest test (6 s)") \
    /* test_ipc.c */ \
    X(ipc_open_in_this_process_shares_the_bytes, CUDA_SKIP_HOST_BYTES) \
    X(ipc_open_in_another_process, CUDA_SKIP_HOST_BYTES) \
    X(ipc_plain_memory_on_the_simulated_card, \
      "the simulated card has no IPC of plain memory (test_cuda.c's cuda_ipc_plain_region checks the driver's)") \
    /* end of list */
/* clang-format on */

#endif /* VRAM_TESTS_CUDA_SKIPS_H */
