"""The attack census of issue 9: every named attack in the suites, by the class it attacks.

Issue 9 asks for at least 60 named attacks, covering every class of the sandbox v3 (1 hermetic
runs, 2 limits that hold as root, 3 a judge where no candidate code ran, 4 a judge that survives
any value, 5 Python equality, 6 a pool that cannot be poisoned, 7 safe fallback and redaction,
8 candidate text as data). This file is that census as data, checked against the suites: every
attack case of every suite's ``ATTACKS`` list is in exactly one class, every test named here
exists, an attack that still wins (an xfail) is listed as open and never counted, and the total
is at least 60. An attack added to a suite without a class fails here, so the census cannot go
stale. Nothing here runs a sandbox: it is collection-time bookkeeping.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

# Suites whose attack cases are listed in a module-level ATTACKS (name-carrying cases).
CASE_SUITES = ("test_attacks", "test_attacks_judge", "test_attacks_redteam")

# (suite, name): name is an ATTACKS case of that suite, or a test function (each of its
# parametrized cases counts as one attack).
CENSUS: dict[int, list[tuple[str, str]]] = {
    1: [  # hermetic runs: nothing a run leaves is seen by a later run; read-only runner and system
        ("test_attacks_redteam6",
         "test_a_candidate_cannot_write_a_job_to_any_prepared_run"),
        ("test_attacks", "network_connect"),
        ("test_attacks", "write_outside_the_work_dir"),
        ("test_attacks", "setsid_double_fork_daemon"),
        ("test_attacks", "test_an_attack_cannot_touch_a_sibling_run_in_flight"),
        ("test_attacks_hermetic", "test_files_planted_anywhere_are_gone_for_the_next_run"),
        ("test_attacks_hermetic", "test_stdlib_shadowing_modules_planted_in_the_work_dir_do_not_shadow"),
        ("test_attacks_hermetic", "test_the_runner_and_system_paths_are_read_only"),
        ("test_attacks_hermetic", "test_ipc_objects_keys_and_daemons_die_with_the_run"),
        ("test_attacks_hermetic", "test_a_planted_spy_cannot_read_a_later_runs_inputs"),
        ("test_attacks_hermetic", "test_gigabytes_into_sysv_shm_are_capped_and_freed_with_the_run"),
        ("test_attacks_hermetic", "test_gigabytes_written_anywhere_are_capped_by_the_runs_tmpfs"),
        ("test_attacks_redteam", "test_a_nested_user_namespace_cannot_mount_a_tmpfs_past_the_disk_cap"),
        ("test_attacks_redteam2",
         "test_a_candidate_cannot_write_replace_or_shadow_the_bytecode_a_later_worker_imports"),
        ("test_attacks_redteam2",
         "test_the_boot_string_imports_the_sandbox_modules_only_from_their_own_directory"),
        ("test_attacks_redteam2", "test_the_private_bytecode_directory_is_writable_by_its_owner_alone"),
    ],
    2: [  # limits for the whole run, also as root
        ("test_attacks_redteam7",
         "test_g_end_rebound_through_its_frame_is_stopped_by_the_runs_limits"),
        ("test_attacks_redteam7",
         "test_stdio_program_that_never_ends_is_a_timeout_not_a_hang"),
        ("test_attacks_redteam6",
         "test_g_kept_alive_after_its_last_bytes_is_stopped_by_the_runs_limits"),
        ("test_attacks", "threads_that_never_end"),
        ("test_attacks", "ignore_sigterm_and_catch_everything"),
        ("test_attacks", "grandchild_holds_the_pipes"),
        ("test_attacks", "bounded_fork_bomb"),
        ("test_attacks", "memory_bomb"),
        ("test_attacks", "cpu_bound_c_call_that_ignores_signals"),
        ("test_attacks_judge", "busy_loop_inside_a_proxy_call"),
        ("test_attacks_judge", "sleep_with_signals_ignored_inside_a_proxy_call"),
        ("test_attacks_judge", "candidate_calls_a_callback_forever"),
        ("test_attacks_redteam", "sigstop_itself_and_a_stopped_child_holding_the_pipes"),
        ("test_attacks_hermetic", "test_a_thousand_threads_are_stopped_at_the_process_limit"),
        ("test_attacks_hermetic", "test_six_hundred_processes_are_stopped_at_the_process_limit"),
        ("test_attacks_hermetic", "test_memory_is_capped_for_all_the_runs_processes_together"),
        ("test_attacks_hermetic", "test_the_cpu_time_of_all_the_runs_processes_is_bounded_by_its_wall_time"),
        ("test_attacks_hermetic", "test_the_sandbox_never_runs_as_host_root"),
        ("test_attacks_crossrun", "test_cpu_burnt_in_processes_and_threads_that_are_gone_still_counts"),
        ("test_attacks_crossrun", "test_one_process_cannot_hold_more_than_the_memory_limit"),
        ("test_attacks_crossrun", "test_the_worker_counts_the_runs_processes_by_parentage_not_by_pid"),
        ("test_attacks_redteam2",
         "test_a_stream_of_fresh_idle_runs_does_not_take_an_honest_runs_lead_over_older_loops"),
        ("test_attacks_redteam2", "test_honest_solutions_that_block_keep_their_verdicts_beside_sixteen_loops"),
        ("test_attacks_crossrun",
         "test_samples_of_a_long_limit_task_do_not_starve_a_short_limit_tasks_honest_sample"),
        ("test_attacks_crossrun",
         "test_memory_churn_with_a_longer_limit_on_other_workers_does_not_time_out_honest_work"),
        ("test_attacks_redteam2", "test_an_honest_sample_released_with_a_batch_of_loops_keeps_its_verdict"),
        ("test_attacks_redteam2",
         "test_an_honest_sample_already_running_when_a_burst_of_loops_arrives_keeps_its_verdict"),
        ("test_attacks_crossrun",
         "test_a_loop_that_starves_itself_under_host_load_is_still_stopped_within_its_cap"),
    ],
    3: [  # a judge where no candidate code ran: forged verdicts, stolen expectations, patched helpers
        ("test_attacks_redteam10", "test_strict_a_candidate_that_crowds_the_judges_cpu_gains_nothing"),
        ("test_attacks_redteam9", "test_no_run_can_trace_or_reach_into_another_process"),
        ("test_attacks_redteam7",
         "test_text_shaped_like_every_known_end_never_ends_the_judge_early"),
        ("test_attacks_redteam7",
         "test_g_that_forges_its_end_and_exits_mid_judging_keeps_only_earlier_verdicts"),
        ("test_attacks_redteam7",
         "test_rlimits_candidate_that_kills_or_stops_the_judge_gains_nothing"),
        ("test_attacks_redteam7",
         "test_stdio_finalizer_forging_frames_and_the_end_gains_nothing"),
        ("test_attacks_redteam7",
         "test_the_judges_nonce_is_nowhere_in_the_candidates_memory"),
        ("test_attacks_redteam6",
         "test_the_exact_end_forged_at_load_only_cuts_the_candidates_own_run"),
        ("test_attacks_redteam6",
         "test_the_exact_end_forged_inside_a_call_cuts_the_later_checks_not_credits_them"),
        ("test_attacks_redteam6",
         "test_frames_forged_after_the_done_frame_are_never_credited"),
        ("test_attacks_redteam6",
         "test_a_call_that_hangs_stays_unpaid_in_a_judged_run_whatever_g_forges"),
        ("test_attacks_redteam5",
         "test_a_forged_finished_marker_never_ends_a_judged_run_before_its_judge"),
        ("test_attacks_crossrun",
         "test_a_forged_finished_marker_gains_nothing_and_leaves_nothing_for_the_next_run"),
        ("test_attacks_crossrun",
         "test_a_judge_frame_ending_in_the_finished_marker_does_not_cut_the_judges_verdicts"),
        ("test_attacks", "builtins_shadowed_in_the_child"),
        ("test_attacks", "sys_exit_zero_at_import"),
        ("test_attacks", "sys_exit_zero_in_every_call"),
        ("test_attacks", "os_exit_zero_at_import"),
        ("test_attacks", "posix_exit_zero_in_call"),
        ("test_attacks", "os_execv_a_clean_process"),
        ("test_attacks", "fake_verdicts_on_stdout"),
        ("test_attacks", "fake_verdicts_on_stderr"),
        ("test_attacks", "forged_frames_with_the_stolen_nonce"),
        ("test_attacks", "stack_walk_writes_verdicts"),
        ("test_attacks", "stack_walk_reads_expected_values"),
        ("test_attacks", "gc_scan_for_test_strings"),
        ("test_attacks", "memory_scan_for_test_strings"),
        ("test_attacks", "read_test_files_on_disk"),
        ("test_attacks", "read_proc_of_every_process"),
        ("test_attacks", "read_inherited_descriptors"),
        ("test_attacks", "read_stdin"),
        ("test_attacks", "monkeypatch_json"),
        ("test_attacks", "monkeypatch_pickle"),
        ("test_attacks", "monkeypatch_the_runner_modules"),
        ("test_attacks", "atexit_writes_a_report"),
        ("test_attacks", "test_forged_reports_reach_no_check_not_even_loops_and_multi_statement_ones"),
        ("test_attacks_judge", "forge_verdict_frames_with_every_nonce_found_on_every_fd"),
        ("test_attacks_judge", "fake_answers_written_on_the_judge_channel"),
        ("test_attacks_judge", "stack_walk_rewrites_the_candidate_side_server"),
        ("test_attacks_judge", "patch_the_runner_and_wire_modules_in_the_candidates_process"),
        ("test_attacks_judge", "read_proc_of_every_process_for_the_judges_secrets"),
        ("test_attacks_judge", "patch_math_and_sum_before_the_setup_helper_poly_runs"),
        ("test_attacks_judge", "patch_builtin_sorted_under_a_reference_helper"),
        ("test_attacks_judge", "candidate_globals_shadow_the_builtins_a_loop_check_uses"),
        ("test_attacks_judge", "candidate_global_shadows_a_stdlib_module_a_loop_check_uses"),
        ("test_attacks_judge", "gc_scan_for_loop_expectations_then_answer_trusted_checks_by_lookup"),
        ("test_attacks_judge", "memory_scan_for_loop_expectations_then_answer_trusted_checks_by_lookup"),
        ("test_attacks_judge", "stack_and_job_walk_for_other_checks"),
        ("test_attacks_judge", "fork_a_child_that_keeps_the_judge_channel_open"),
        ("test_attacks_judge", "mutate_an_argument_behind_the_checks_back"),
        ("test_attacks_judge", "test_the_judges_job_never_reaches_the_candidates_process"),
        ("test_attacks_judge", "test_hostile_task_data_is_contained_in_the_judge_process_too"),
        ("test_attacks_redteam", "stop_iteration_ends_map_zip_and_filter_checks_quietly"),
        ("test_attacks_redteam", "stop_iteration_subclass_raised_through_map"),
        ("test_attacks_redteam", "define_all_and_max_next_to_the_builtin_the_task_is_about"),
        ("test_attacks_redteam", "patch_builtins_all_and_max_at_import"),
        ("test_attacks_redteam", "define_only_all_and_max_leave_sum_the_builtin"),
        ("test_attacks_redteam", "stray_answers_queued_on_the_judge_channel_at_import"),
        ("test_attacks_redteam", "unsolicited_callbacks_and_copy_backs_on_the_judge_channel"),
        ("test_attacks_redteam", "test_a_candidates_stop_iteration_fails_the_check_and_says_so"),
        ("test_attacks_redteam", "test_stdio_frames_a_program_forges_for_other_cases_only_cost_it_those_cases"),
    ],
    4: [  # a judge that survives any value: budgets, and every fault is a failed check
        ("test_attacks_redteam5",
         "test_an_honest_value_whose_frame_ends_like_the_finished_marker_keeps_its_later_checks"),
        ("test_attacks_redteam5",
         "test_an_honest_value_whose_frame_ends_like_a_done_frame_keeps_its_later_checks"),
        ("test_attacks", "output_flood"),
        ("test_attacks", "result_channel_flood"),
        ("test_attacks", "hostile_exception_messages"),
        ("test_attacks", "reduce_runs_code_in_whoever_unpickles"),
        ("test_attacks_judge", "os_exit_inside_a_proxy_call"),
        ("test_attacks_judge", "segfault_inside_a_proxy_call"),
        ("test_attacks_judge", "sys_exit_inside_a_proxy_call"),
        ("test_attacks_judge", "close_the_judge_channel_inside_a_proxy_call"),
        ("test_attacks_judge", "deep_and_huge_values_to_the_judge"),
        ("test_attacks_judge", "hostile_exceptions_raised_to_the_judge"),
        ("test_attacks_judge", "oversized_frame_header_on_the_judge_channel"),
        ("test_attacks_judge", "callbacks_that_recurse_forever"),
        ("test_attacks_judge", "non_plain_data_handed_to_a_callback"),
        ("test_attacks_judge", "test_failures_inside_proxy_calls_say_what_happened"),
        ("test_attacks_redteam", "flood_of_tiny_frames_up_to_the_result_cap"),
        ("test_attacks_redteam", "sixteen_megabyte_answer_to_every_loop_iteration"),
        ("test_attacks_redteam", "answers_that_make_the_checks_own_sort_slow"),
        ("test_attacks_redteam", "test_hostile_task_text_is_a_failed_check_never_an_exception"),
        ("test_attacks_redteam", "test_duplicates_are_not_hash_collisions_but_chosen_collisions_still_are"),
        ("test_values", "test_forged_values_over_a_budget_are_refused_by_both_decoders"),
        ("test_values", "test_forged_colliding_keys_are_refused_before_a_quadratic_build"),
        ("test_values", "test_operations_that_outgrow_their_operands_are_refused_before_they_run"),
        ("test_values", "test_the_judge_survives_huge_values_in_any_check"),
        ("test_values", "test_forged_frame_fields_of_any_type_do_not_break_the_judge"),
        ("test_values", "test_a_huge_int_answer_fails_its_check_with_a_message_instead_of_raising"),
        ("test_values", "test_values_past_the_result_cap_fail_with_a_message_naming_it"),
        ("test_values", "test_code_reward_scores_a_row_the_sandbox_fails_on_and_keeps_the_others"),
    ],
    5: [  # equality: values are plain data on the trusted side, so Python's == opens no hole
        ("test_attacks", "always_equal_object"),
        ("test_attacks", "always_equal_int_subclass"),
        ("test_attacks", "always_equal_str_subclass"),
        ("test_attacks", "class_spoofing_object"),
        ("test_attacks_judge", "always_equal_object_to_the_judge"),
        ("test_attacks_judge", "int_subclass_liar_to_the_judge"),
        ("test_attacks_judge", "class_spoofing_object_to_the_judge"),
        ("test_values", "test_candidate_subclasses_cross_as_their_base_types_content"),
        ("test_values", "test_a_candidate_dict_subclass_with_a_lying_eq_does_not_pass"),
    ],
    6: [  # a pool that cannot be poisoned: the next submission gets a healthy, identical worker
        ("test_attacks_redteam11", "test_strict_level_is_unaffected"),
        ("test_attacks_redteam10", "test_strict_level_is_unaffected"),
        ("test_attacks_redteam10", "test_the_refused_syscalls_have_no_other_door"),
        ("test_attacks_redteam9", "test_strict_level_is_unaffected"),
        ("test_attacks_redteam8",
         "test_rlimits_processes_left_behind_at_any_depth_never_touch_the_next_runs"),
        ("test_attacks_redteam7",
         "test_rlimits_daemon_left_by_one_run_never_touches_the_next"),
        ("test_attacks_redteam7",
         "test_alternating_hostile_and_honest_submissions_keep_every_honest_verdict"),
        ("test_attacks_redteam7",
         "test_no_descriptor_of_the_warm_up_reaches_the_job"),
        ("test_attacks_redteam6",
         "test_a_run_ending_early_with_load_behind_it_charges_nothing_to_the_next_run"),
        ("test_attacks_redteam6",
         "test_alternating_every_attack_with_honest_runs_keeps_every_honest_verdict"),
        ("test_attacks_crossrun",
         "test_a_forged_finished_marker_with_the_stdout_pipe_locked_does_not_wedge_the_worker"),
        ("test_attacks_crossrun",
         "test_a_splice_holding_the_stdout_pipe_at_a_normal_end_is_torn_down_with_the_run"),
        ("test_attacks_crossrun",
         "test_syscalls_that_can_hold_a_pipes_lock_are_refused_to_every_process_of_a_run"),
        ("test_attacks_redteam5",
         "test_a_child_flooding_the_pipes_past_the_end_neither_wedges_nor_delays_the_worker"),
        ("test_attacks_redteam5",
         "test_a_run_that_is_slow_to_tear_down_only_delays_the_next_run_on_its_worker"),
        ("test_attacks", "ctypes_segfault"),
        ("test_attacks", "kill_the_parent_and_everything_visible"),
        ("test_attacks_judge", "kill_everything_visible_from_inside_a_proxy_call"),
        ("test_attacks_redteam", "close_every_pipe_then_keep_running"),
        ("test_attacks_hermetic", "test_a_deep_directory_tree_does_not_wedge_the_worker"),
        ("test_attacks_hermetic", "test_alternating_hostile_and_honest_submissions_on_one_pool"),
        ("test_attacks_hermetic", "test_a_worker_that_fails_its_health_check_is_replaced_before_use"),
        ("test_attacks_crossrun", "test_memory_a_finished_run_leaves_is_never_charged_to_the_next"),
        ("test_attacks_crossrun", "test_a_smaller_memory_limit_right_after_a_big_run_keeps_the_worker"),
        ("test_attacks_crossrun", "test_page_cache_a_run_leaves_is_not_reclaimed_on_the_next_runs_clock"),
        ("test_attacks_crossrun", "test_a_cpu_hog_killed_at_its_limit_leaves_no_debt_for_the_next_run"),
        ("test_attacks_crossrun",
         "test_zombies_stopped_and_traced_children_never_use_up_the_next_runs_processes"),
        ("test_attacks_crossrun", "test_an_attack_on_one_worker_does_not_time_out_honest_work_on_another"),
        ("test_attacks_crossrun", "test_a_batch_scores_the_same_alone_and_mixed_with_every_attack_above"),
        ("test_attacks_redteam2",
         "test_bytecode_removed_from_the_host_after_it_was_compiled_never_stops_a_later_worker"),
        ("test_attacks_redteam2", "test_bytecode_the_sandbox_uid_cannot_reach_is_staged_by_the_root_launcher"),
        ("test_attacks_redteam2", "test_a_sandbox_file_edited_after_its_bytecode_was_compiled_gets_fresh_bytecode"),
    ],
    7: [  # safe fallback, and redaction on the trusted side for everyone
        ("test_attacks_redteam11", "test_rlimits_a_run_cannot_lower_later_runs_limits"),
        ("test_attacks_redteam11", "test_rlimits_a_stray_continued_by_its_timer_is_swept_without_a_give_up"),
        ("test_attacks_redteam11", "test_rlimits_a_frozen_stray_does_not_delay_the_next_submission"),
        ("test_attacks_redteam11", "test_rlimits_a_run_that_reschedules_itself_keeps_its_worker"),
        ("test_attacks_redteam11", "test_rlimits_a_stray_cannot_join_the_workers_process_group"),
        ("test_attacks_redteam10", "test_rlimits_a_stopped_worker_never_delays_the_next_submission"),
        ("test_attacks_redteam10", "test_rlimits_a_stray_in_vfork_wait_is_swept_without_a_give_up"),
        ("test_attacks_redteam10", "test_rlimits_no_stray_outlives_the_give_up"),
        ("test_attacks_redteam10", "test_rlimits_a_run_cannot_reschedule_later_runs"),
        ("test_attacks_redteam10", "test_rlimits_honest_leftovers_are_swept_without_a_give_up"),
        ("test_attacks_redteam9", "test_rlimits_siblings_that_hop_ahead_of_the_sweep_are_all_caught"),
        ("test_attacks_redteam9", "test_rlimits_strays_with_odd_names_or_exited_leaders_are_swept"),
        ("test_attacks_redteam9", "test_rlimits_fork_bomb_that_outlasts_the_sweep_budget"),
        ("test_attacks_redteam9",
         "test_rlimits_candidate_that_blocks_the_zygote_never_delays_the_next_run"),
        ("test_attacks_redteam7", "test_rlimits_root_candidate_cannot_forge_the_judges_verdicts"),
        ("test_attacks", "environment_exfiltration"),
        ("test_attacks_hermetic", "test_the_fallback_refuses_to_run_as_root_unless_allowed"),
        ("test_attacks_hermetic",
         "test_fallback_candidates_get_an_empty_environment_and_no_root_when_possible"),
        ("test_values", "test_secret_values_are_redacted_from_every_result"),
        ("test_values", "test_coding_env_never_shows_a_secret_value"),
        ("test_attacks_hermetic", "test_a_secret_a_fallback_candidate_prints_is_redacted_from_its_result"),
    ],
    8: [  # candidate text is data: stored, resumed, shown and quoted without error
        ("test_attacks_redteam6", "test_a_50_mb_job_arrives_whole"),
        ("test_attacks_redteam6", "test_a_20_mb_job_with_a_judge_still_gives_the_pair_its_channel"),
        ("test_attacks_redteam6", "test_jobs_of_odd_sizes_through_the_pool_score_exactly"),
        ("test_attacks_redteam", "lone_surrogates_and_nul_in_exception_messages_and_output"),
        ("test_untrusted", "test_any_candidate_string_is_stored_read_back_and_resumed_unchanged"),
        ("test_untrusted", "test_control_tokens_are_broken_up_but_still_readable"),
        ("test_untrusted", "test_feedback_quotes_candidate_output_so_it_cannot_imitate_the_environment"),
        ("test_untrusted", "test_cli_check_shows_hostile_failure_messages_without_error"),
        ("test_untrusted", "test_report_and_compare_of_a_run_full_of_hostile_strings_work"),
        ("test_untrusted", "test_a_sandboxed_candidates_hostile_text_is_stored_and_resumed_unchanged"),
    ],
}

# Attacks that still win, each an xfail in its suite (strict where it wins every time): listed,
# never counted.
OPEN: list[tuple[str, str]] = [
    ("test_attacks_redteam2",
     "test_an_idle_run_older_than_the_rest_does_not_level_an_honest_run_with_older_loops"),
]


def _suite(name: str) -> ModuleType:
    return importlib.import_module(name)


def _marks(function: Callable[..., Any]) -> list[Any]:
    return list(getattr(function, "pytestmark", []))


def _cases(suite: str, name: str) -> int:
    """How many attacks ``name`` is in ``suite``: 1 for an ATTACKS case, the number of
    parametrized cases for a test function; an unknown name fails."""
    module = _suite(suite)
    if name in {case.name for case in getattr(module, "ATTACKS", [])}:
        return 1
    function = getattr(module, name, None)
    assert callable(function) and name.startswith("test_"), f"{suite} has no attack {name!r}"
    count = 1
    for mark in _marks(function):
        if mark.name == "parametrize":
            count *= len(mark.args[1])
    return count


def census() -> dict[int, int]:
    return {cls: sum(_cases(suite, name) for suite, name in entries) for cls, entries in CENSUS.items()}


def test_every_named_attack_exists_and_is_counted_once() -> None:
    entries = [entry for entries in CENSUS.values() for entry in entries]
    assert len(entries) == len(set(entries)), "an attack is listed twice"
    for suite, name in entries + OPEN:
        assert _cases(suite, name) >= 1


def test_every_attack_case_of_every_suite_has_a_class() -> None:
    """A new ATTACKS case must be placed in a class here, so the census stays complete."""
    listed = {entry for entries in CENSUS.values() for entry in entries}
    for suite in CASE_SUITES:
        missing = [case.name for case in _suite(suite).ATTACKS if (suite, case.name) not in listed]
        assert missing == [], (suite, missing)


def test_open_holes_are_xfails_and_counted_attacks_are_not() -> None:
    """An attack that still wins is an xfail and sits in OPEN; none of the counted is one."""
    for suite, name in OPEN:
        assert any(m.name == "xfail" for m in _marks(getattr(_suite(suite), name))), (suite, name)
    for entries in CENSUS.values():
        for suite, name in entries:
            function = getattr(_suite(suite), name, None)
            if function is not None:
                assert not any(m.name == "xfail" for m in _marks(function)), (suite, name)


def test_at_least_60_named_attacks_and_every_class_has_some() -> None:
    counts = census()
    print(f"[census] by class {counts}; total {sum(counts.values())}; open (xfail) {len(OPEN)}")
    assert set(counts) == set(range(1, 9)) and all(n >= 3 for n in counts.values()), counts
    assert sum(counts.values()) >= 60, counts
