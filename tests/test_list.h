/*
 * test_list.h: the one list of every test, in the order they run: X(group, name), where group is
 * the file (test_<group>.c) that defines TEST(name). The runner selects tests by name or by
 * "group.name" ("alloc_double_free_is_invalid", "env.*", "*fraction*"). CMake checks at configure
 * time that every TEST() of the test files is listed here.
 */
#ifndef VRAM_TEST_LIST_H
#define VRAM_TEST_LIST_H

/* clang-format off */
#define TEST_LIST(X) \
    /* test_physical.c */ \
    X(physical, physical_list_does_not_start_runtime) \
    X(physical, physical_count_with_null_output) \
    X(physical, physical_capacity_smaller_than_count) \
    X(physical, physical_names_and_properties) \
    X(physical, physical_null_count_is_invalid) \
    X(physical, physical_cuda_visible_devices_selects_card) \
    X(physical, physical_cuda_visible_devices_empty_is_no_device) \
    X(physical, physical_bogus_backend_is_invalid) \
    X(physical, physical_cuda_backend) \
    X(physical, physical_default_backend_is_cuda) \
    X(physical, physical_failed_discovery_is_not_cached) \
    X(physical, physical_sim_after_failed_cuda_look) \
    X(physical, physical_list_after_init) \
    /* test_config.c */ \
    X(config, start_by_list_logical_devices) \
    X(config, start_by_get_memory_info) \
    X(config, start_by_malloc) \
    X(config, start_by_init) \
    X(config, start_not_by_configuration_calls) \
    X(config, frozen_visible_devices_change_fails) \
    X(config, frozen_visible_devices_same_set_ok) \
    X(config, frozen_visible_devices_default_set_ok) \
    X(config, frozen_growth_change_fails) \
    X(config, frozen_growth_same_value_ok) \
    X(config, frozen_growth_compares_with_forced_growth) \
    X(config, frozen_limit_change_fails) \
    X(config, frozen_limit_none_set_ok) \
    X(config, frozen_logical_configuration_change_fails) \
    X(config, frozen_logical_configuration_none_set_ok) \
    X(config, config_allowed_again_after_shutdown) \
    X(config, config_racing_with_start_is_serialised) \
    X(config, visible_devices_default_is_all) \
    X(config, visible_devices_get_is_ascending) \
    X(config, visible_devices_duplicates_are_invalid) \
    X(config, visible_devices_bad_arguments) \
    X(config, visible_devices_none_hides_all) \
    X(config, unrecognized_physical_index_7) \
    X(config, unrecognized_physical_index_negative) \
    X(config, unrecognized_physical_index_after_start) \
    X(config, config_getters_null_outputs_are_invalid) \
    X(config, growth_unset_reads_minus_one) \
    X(config, config_limit_zero_removes_limit) \
    /* test_logical.c */ \
    X(logical, logical_enumerates_visible_cards_in_order) \
    X(logical, logical_split_on_second_card) \
    X(logical, logical_hidden_cards_give_none) \
    X(logical, logical_list_capacity_smaller_than_count) \
    X(logical, logical_zero_limit_is_invalid) \
    X(logical, logical_bad_arguments) \
    X(logical, logical_sum_above_card_is_conflict) \
    X(logical, logical_sum_equal_to_card_is_accepted) \
    X(logical, logical_memory_limit_above_card_is_conflict) \
    X(logical, logical_zero_configs_remove_the_split) \
    X(logical, logical_get_returns_what_was_set) \
    X(logical, logical_limit_capped_by_card_limit) \
    X(logical, logical_devices_are_independent_pools) \
    X(logical, logical_device_of_physical_card) \
    X(logical, logical_plugin_alloc_and_free) \
    /* test_growth.c */ \
    X(growth, prealloc_takes_tf_default) \
    X(growth, prealloc_default_on_small_card) \
    X(growth, prealloc_takes_the_limit) \
    X(growth, prealloc_limit_may_be_the_whole_card) \
    X(growth, prealloc_logical_devices_take_their_limits) \
    X(growth, prealloc_allocations_do_not_grow) \
    X(growth, prealloc_logical_sum_above_card_limit_is_conflict) \
    X(growth, growth_starts_near_zero) \
    X(growth, growth_grows_with_allocations) \
    X(growth, growth_with_limit_stops_at_limit) \
    X(growth, growth_differs_between_cards) \
    X(growth, growth_logical_device_limit_inside_card_limit) \
    X(growth, growth_logical_devices_share_card_budget_alternating) \
    X(growth, growth_with_logical_limit_above_card_cap) \
    X(growth, growth_reuses_memory_it_holds) \
    X(growth, growth_limit_not_multiple_of_granularity) \
    X(growth, growth_tiny_logical_device_is_usable) \
    X(growth, growth_shared_budget_oom_names_card_limit) \
    X(growth, growth_fraction_limit_is_reachable) \
    X(growth, prealloc_fraction_limit_is_reachable) \
    X(growth, growth_odd_limit_in_one_block) \
    /* test_oom.c */ \
    X(oom, oom_limit_from_api_is_named) \
    X(oom, oom_limit_from_api_with_growth_is_named) \
    X(oom, oom_limit_from_env_is_named) \
    X(oom, oom_limit_from_device_env_is_named) \
    X(oom, oom_limit_from_logical_configuration_is_named) \
    X(oom, oom_card_full_names_driver_error) \
    X(oom, oom_card_full_shared_by_two_logical_devices) \
    X(oom, oom_fragmentation_is_named) \
    X(oom, oom_count_per_device) \
    X(oom, oom_request_larger_than_card) \
    /* test_alloc.c */ \
    X(alloc, alloc_pointers_are_aligned_to_256) \
    X(alloc, alloc_live_blocks_never_overlap_prealloc) \
    X(alloc, alloc_live_blocks_never_overlap_growth) \
    X(alloc, alloc_blocks_are_usable_memory) \
    X(alloc, alloc_size_zero_gives_null) \
    X(alloc, alloc_free_null_is_ok) \
    X(alloc, alloc_free_host_pointer_is_invalid) \
    X(alloc, alloc_free_interior_pointer_is_invalid) \
    X(alloc, alloc_free_of_free_space_is_invalid) \
    X(alloc, alloc_double_free_is_invalid) \
    X(alloc, alloc_free_before_start_is_invalid) \
    X(alloc, alloc_null_out_pointer_is_invalid) \
    X(alloc, alloc_huge_request_prealloc) \
    X(alloc, alloc_huge_request_growth) \
    X(alloc, alloc_logical_index_out_of_range) \
    X(alloc, alloc_pointer_from_other_logical_device_frees) \
    X(alloc, alloc_status_names) \
    X(alloc, alloc_whole_preallocated_pool) \
    X(alloc, alloc_whole_growing_pool) \
    X(alloc, alloc_old_pointer_after_shutdown_is_invalid) \
    /* test_stats.c */ \
    X(stats, stats_current_is_sum_of_rounded_sizes) \
    X(stats, stats_counts_allocs_and_frees) \
    X(stats, stats_failures_do_not_count_as_allocs) \
    X(stats, stats_peak_is_high_water_mark) \
    X(stats, stats_reset_sets_peaks_to_now) \
    X(stats, stats_peak_reserved_follows_growth) \
    X(stats, stats_are_per_logical_device) \
    X(stats, stats_largest_free_block_tracks_allocations) \
    X(stats, stats_check_every_device) \
    X(stats, stats_check_before_start) \
    X(stats, stats_driver_calls_counted) \
    /* test_lifecycle.c */ \
    X(lifecycle, shutdown_with_live_blocks_is_conflict) \
    X(lifecycle, shutdown_with_live_block_on_other_device_is_conflict) \
    X(lifecycle, shutdown_then_new_configuration_and_init) \
    X(lifecycle, shutdown_keeps_api_configuration) \
    X(lifecycle, shutdown_rereads_environment) \
    X(lifecycle, shutdown_when_not_initialized_is_ok) \
    X(lifecycle, shutdown_and_init_many_times) \
    X(lifecycle, shutdown_growth_pool_returns_memory) \
    X(lifecycle, init_twice_is_ok) \
    X(lifecycle, init_failure_leaves_runtime_stopped) \
    X(lifecycle, init_from_8_threads_at_once) \
    X(lifecycle, init_by_malloc_from_8_threads_at_once) \
    X(lifecycle, shutdown_returns_every_byte_to_the_driver) \
    X(lifecycle, shutdown_races_with_allocating_threads) \
    /* test_threads.c */ \
    X(threads, threads_one_device_prealloc) \
    X(threads, threads_one_device_growth) \
    X(threads, threads_several_logical_devices) \
    X(threads, threads_several_logical_devices_growth_shared_budget) \
    X(threads, threads_mixed_with_memory_info) \
    X(threads, threads_mixed_with_observer_and_check) \
    X(threads, threads_tight_limit_with_ooms) \
    X(threads, threads_tight_limit_growth_arenas) \
    X(threads, threads_init_use_shutdown_race) \
    /* test_perthread.c */ \
    X(perthread, tcache_parks_per_thread_and_keeps_the_figures_exact) \
    X(perthread, tcache_single_thread_parks_nothing) \
    X(perthread, tcache_parked_memory_serves_a_request_at_the_limit) \
    X(perthread, tcache_parked_blocks_of_another_thread_serve_it_too) \
    X(perthread, tcache_trim_and_shutdown_give_parked_memory_back) \
    X(perthread, tcache_off_keeps_every_block_in_the_pool) \
    X(perthread, tcache_option_is_checked) \
    X(perthread, arenas_one_thread_keeps_one) \
    X(perthread, arenas_second_thread_gets_its_own_and_figures_add_up) \
    X(perthread, arenas_threads_each_get_one_whatever_came_before) \
    X(perthread, arenas_share_the_limit) \
    X(perthread, arenas_room_is_what_the_shared_limit_has_left) \
    X(perthread, arenas_stream_ordered_requests_stay_in_the_first) \
    X(perthread, arenas_off_and_preallocated_pools_keep_one) \
    X(perthread, arenas_trim_and_shutdown_cover_every_arena) \
    X(perthread, arenas_option_is_checked) \
    /* test_stress.c */ \
    X(stress, stress_prealloc_checked_every_step) \
    X(stress, stress_growth_checked_every_step) \
    X(stress, stress_prealloc_tight_limit) \
    X(stress, stress_growth_tight_limit) \
    X(stress, stress_growth_odd_limit) \
    X(stress, stress_prealloc_odd_limit) \
    /* test_driver_fail.c */ \
    X(driver_fail, driver_fail_mid_growth) \
    X(driver_fail, driver_fail_mid_growth_several_logical_devices) \
    X(driver_fail, driver_fail_at_start_without_growth) \
    X(driver_fail, driver_fail_at_start_of_second_logical_device) \
    X(driver_fail, driver_fail_at_start_with_growth_is_fine) \
    /* test_env.c */ \
    X(env, env_force_growth_true_overrides_program) \
    X(env, env_force_growth_false_overrides_program) \
    X(env, env_force_growth_applies_to_every_card) \
    X(env, env_force_growth_bad_value) \
    X(env, env_memory_limit) \
    X(env, env_memory_limit_overrides_larger_api_limit) \
    X(env, env_memory_limit_overrides_smaller_api_limit) \
    X(env, env_memory_limit_bad_values) \
    X(env, env_memory_limit_above_card_is_conflict) \
    X(env, env_memory_limit_per_card) \
    X(env, env_memory_limit_per_card_takes_precedence) \
    X(env, env_memory_limit_per_card_unknown_card) \
    X(env, env_memory_limit_per_card_bad_value) \
    X(env, env_memory_limit_per_card_above_card_is_conflict) \
    X(env, env_memory_limit_with_growth) \
    X(env, env_memory_fraction) \
    X(env, env_memory_fraction_and_limit_smaller_wins) \
    X(env, env_memory_fraction_bad_values) \
    X(env, env_sim_devices_count_times_size) \
    X(env, env_sim_devices_list) \
    X(env, env_sim_devices_bad_values) \
    X(env, env_sim_fail_alloc_after_bad_value) \
    X(env, env_backend_sim) \
    X(env, env_backend_bogus) \
    X(env, env_read_at_start_only) \
    /* test_parse.c */ \
    X(parse, parse_size_good) \
    X(parse, parse_size_bad) \
    X(parse, parse_size_rejects_hexadecimal) \
    X(parse, parse_size_null_arguments) \
    /* test_async.c */ \
    X(async, async_same_stream_reuses_at_once) \
    X(async, async_reaping_asks_each_stream_once) \
    X(async, async_plugin_frees_share_events) \
    X(async, async_plugin_frees_merge_on_their_stream) \
    X(async, async_plugin_frees_do_not_merge_across_the_small_zone) \
    X(async, async_plugin_frees_are_trimmed) \
    X(async, async_solo_stream_frees_at_once) \
    X(async, async_solo_stream_waited_for_before_others) \
    X(async, async_solo_stream_that_cannot_be_waited_for_keeps_its_memory) \
    X(async, async_solo_stream_ends_with_a_second_stream) \
    X(async, async_solo_stream_from_several_threads) \
    X(async, async_other_stream_waits_when_no_room) \
    X(async, async_plain_malloc_waits_when_no_room) \
    X(async, async_other_stream_gets_new_block_with_room) \
    X(async, async_plain_malloc_gets_new_block_while_free_pending) \
    X(async, async_other_stream_reuses_after_complete) \
    X(async, async_free_foreign_pointer_is_invalid) \
    X(async, async_size_zero_gives_null) \
    X(async, async_stats_after_completion) \
    X(async, async_mixed_with_plain_free) \
    X(async, async_shutdown_with_pending_free) \
    X(async, async_tight_pool_many_rounds) \
    X(async, async_same_stream_reuses_part_of_a_larger_block) \
    X(async, async_current_drops_at_free) \
    X(async, async_stress_checked_every_step) \
    X(async, async_threads_with_own_streams) \
    /* test_release.c */ \
    X(release, trim_growth_returns_free_extents) \
    X(release, trim_large_keep_releases_nothing) \
    X(release, trim_partial_keep) \
    X(release, trim_unknown_logical_device) \
    X(release, trim_starts_the_runtime) \
    X(release, trim_prealloc_empty_gives_everything_back) \
    X(release, trim_prealloc_then_oversized_request) \
    X(release, trim_prealloc_with_live_blocks_keeps) \
    X(release, trim_growth_plain_returns_free_regions) \
    X(release, trim_growth_odd_limit) \
    X(release, trim_waits_for_pending_frees) \
    X(release, pressure_reserved_within_limit_reuses_idle) \
    X(release, growth_prefers_mapped_memory_to_mapping_more) \
    X(release, growth_hold_large_moves_idle_memory_under_a_large_block) \
    X(release, growth_small_blocks_keep_out_of_large_holes) \
    X(release, growth_small_zone_full_spills_into_the_rest) \
    X(release, growth_small_zone_shares_a_one_granule_limit) \
    X(release, pressure_small_blocks_in_freed_large_extent) \
    X(release, pressure_shared_card_budget_and_trim) \
    X(release, replay_tight_limit_vmm_report) \
    X(release, replay_tight_limit_plain_and_prealloc_fail_more) \
    X(release, alloc_conf_good_strings) \
    X(release, alloc_conf_last_call_wins_and_reset) \
    X(release, alloc_conf_bad_strings_name_the_key) \
    X(release, alloc_conf_bad_string_changes_nothing) \
    X(release, alloc_conf_after_start) \
    X(release, alloc_conf_after_default_start) \
    X(release, alloc_conf_env_overrides_api_vmm_false) \
    X(release, alloc_conf_env_overrides_api_vmm_true) \
    X(release, alloc_conf_env_overrides_only_its_keys) \
    X(release, alloc_conf_env_malformed_fails_init) \
    X(release, alloc_conf_kept_across_shutdown) \
    X(release, alloc_conf_vmm_false_prealloc_unchanged) \
    X(release, alloc_conf_extent_and_hold_peak_strings) \
    X(release, alloc_conf_extent_mb_gives_back_finely) \
    X(release, alloc_conf_hold_peak) \
    X(release, idle_release_returns_unused_memory) \
    X(release, idle_release_not_before_a_period) \
    X(release, idle_release_keeps_live_blocks) \
    X(release, idle_release_keeps_memory_in_continuous_use) \
    X(release, idle_release_prefers_memory_that_stayed_unused) \
    X(release, idle_release_off_keeps_memory) \
    X(release, idle_release_prealloc_untouched) \
    X(release, idle_release_plain_growth) \
    X(release, idle_release_shutdown_is_prompt) \
    X(release, idle_release_restart_many_times) \
    X(release, idle_release_races_with_allocations) \
    X(release, vmm_maps_only_what_blocks_need) \
    X(release, vmm_second_pass_reuses_memory) \
    X(release, vmm_async_same_stream_reuse) \
    X(release, vmm_malloc_waits_for_pending_free_at_limit) \
    X(release, vmm_async_tight_limit_waits_and_remaps) \
    X(release, vmm_maps_ahead_only_in_a_burst) \
    X(release, vmm_map_ahead_saves_driver_calls) \
    /* end of list */
/* clang-format on */

#endif /* VRAM_TEST_LIST_H */
