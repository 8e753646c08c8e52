"""The names of the metrics the trainer logs and the offline tools read, in one place.

The trainer writes them through verl's ``Tracking``; ``recipe.pc_tools`` (report, plan, cost model) and the tests
read them back from logs. A rename here moves all of them together.
"""

from __future__ import annotations

import re

# --- per step: what was generated, trained and counted --------------------------------------------------------------
GLOBAL_STEP = "training/global_step"
# The run's configured last step (verl's total_training_steps): a log whose last step is below it was cut short.
TOTAL_TRAINING_STEPS = "training/total_training_steps"
# Wall-clock time (Unix seconds) at the end of the step, its validation included: with the launch time, a run's
# start-up and how long it took.
UNIX_TIME = "perf/unix_time_s"
EPOCH = "training/epoch"
ROUNDS = "training/num_gen_batches"  # generation rounds this step took
PROMPTS_IN_BATCH = "training/num_prompt_in_batch"
UNFILLED_BATCH = "training/unfilled_batch"
UNFILLED_DROPPED_PROMPTS = "training/unfilled_dropped_prompts"
TOTAL_CONSUMED_PROMPTS = "training/total_consumed_prompts"
TOTAL_SAMPLING_ROUNDS = "training/total_sampling_rounds"
NUM_EVICTED_PROMPTS = "training/num_evicted_prompts"
ZERO_VARIANCE_GROUP_FRAC = "training/zero_variance_group_frac"
PPO_MINI_BATCHES = "training/ppo_mini_batches"
PARTIAL_MINI_BATCH_WEIGHT = "training/partial_mini_batch_weight"
OPTIMIZER_STEPS = "training/optimizer_steps"
# verl's rollout/actor probability difference over the rows generated this step (no reused pilots).
FRESH_PROBS_DIFF = "training/fresh_rollout_probs_diff_mean"

ROLLOUTS_PILOT = "rollout_stats/num_rollouts_sample_explore"
ROLLOUTS_COMMIT = "rollout_stats/num_rollouts_sample_commit"
ROLLOUTS_SAMPLED = "rollout_stats/num_rollouts_sample"  # pilot + commit: the paper's cost per step
ROLLOUTS_TRAINED = "rollout_stats/num_rollouts_train"
ROLLOUTS_PADDING = "rollout_stats/num_rollouts_padding"
ROLLOUTS_DOWNSAMPLED = "rollout_stats/num_rollouts_downsampled"
CUMULATIVE_SAMPLED = "rollout_stats/cumulative_rollouts_sample"  # the x-axis of every accuracy curve
CUMULATIVE_TRAINED = "rollout_stats/cumulative_rollouts_train"

BUFFER_ADDED = "buffer_stats/local/add_count"
BUFFER_POPPED = "buffer_stats/local/pop_count"
BUFFER_FLUSHED = "buffer_stats/local/evict_count"
BUFFER_OVERFLOW = "buffer_stats/local/overflow_count"
BUFFER_SIZE = "buffer_stats/local/buffer_size"
OFF_POLICY = "off_policy_stats/local"  # prefix of count/mean/std/min/max of a commit's pilot age in steps

CANDIDATES = "filtering_stats/num_candidates"
PASS_COUNT = "filtering_stats/pass_count"
PASS_RATE = "filtering_stats/pass_rate"
TOO_CORRECT_COUNT = "filtering_stats/too_correct_count"
TOO_CORRECT_RATE = "filtering_stats/too_correct_rate"
TOO_INCORRECT_COUNT = "filtering_stats/too_incorrect_count"
TOO_INCORRECT_RATE = "filtering_stats/too_incorrect_rate"
EVICT_MARKED = "filtering_stats/evict_marked_count"
SCREENED_OUT = "filtering_stats/screened_out_count"
BAND_UPPER = "filtering_stats/too_correct_threshold_upper"
BAND_LOWER = "filtering_stats/too_correct_threshold_lower"
SKIPPED = "filtering_stats/skipped_count"
SKIP_TOTAL = "filtering_stats/skip_total"
SKIP_P_EASY = "filtering_stats/skip_p_easy"
SKIP_P_HARD = "filtering_stats/skip_p_hard"
SKIP_HISTORY_PROMPTS = "filtering_stats/skip_history_prompts"

PILOT_METRIC_MEAN = "pilot_stats/metric_mean"
PILOT_MEAN_OF_MEANS = "pilot_stats/prompt_mean_of_means"
PILOT_STD_OF_MEANS = "pilot_stats/prompt_std_of_means"
PILOT_FRAC_ALL_ZERO = "pilot_stats/frac_all_zero"
PILOT_FRAC_ALL_ONE = "pilot_stats/frac_all_one"

# algorithm.rollout_allocation=knapsack: what its knapsacks chose this step.
KNAPSACK_COMMIT_SIZE = "knapsack_stats/commit_size"  # prefix of count/mean/std/min/max of the commit sizes
KNAPSACK_VALUE = "knapsack_stats/value"  # the summed value of the commits (recipe.pc.knapsack)
KNAPSACK_UNIFORM_VALUE = "knapsack_stats/uniform_value"  # the best value of as many commits of rollout.n each
KNAPSACK_EDGE_CANDIDATES = "knapsack_stats/edge_candidates"  # prompts Pilot-Commit would not buffer, offered
KNAPSACK_EDGE_COMMITTED = "knapsack_stats/edge_committed"  # of those, committed
KNAPSACK_EDGE_SHARE = "knapsack_stats/edge_committed_share"  # committed / offered (0 when none was offered)

# --- per epoch -------------------------------------------------------------------------------------------------------
EXCLUSION_EPOCH = "exclusion_stats/epoch"
EVICTED_THIS_EPOCH = "exclusion_stats/evicted_this_epoch"
DATASET_SIZE = "exclusion_stats/dataset_size"
ORIGINAL_SIZE = "exclusion_stats/original_size"
CARRIED_PROMPTS = "exclusion_stats/carried_prompts"
CARRIED_BUFFER_ENTRIES = "exclusion_stats/carried_buffer_entries"
DROPPED_PARTIAL_PROMPTS = "exclusion_stats/dropped_partial_prompts"
FLUSHED_BUFFER_ENTRIES = "exclusion_stats/flushed_buffer_entries"

# --- per validation at rollout budgets (trainer.val_rollout_interval set; logged with each validation) -------------
# The largest multiple of the interval reached since the previous validation: the budget this point stands for.
# Absent when no multiple was reached (the last step, a trainer.test_freq step, or before training).
VAL_BUDGET = "val_budget/budget"
# How many multiples this validation stands for (> 1 when one step crossed several): they are
# VAL_BUDGET - k * VAL_BUDGET_INTERVAL for k = 0 .. VAL_BUDGETS_REACHED - 1.
VAL_BUDGETS_REACHED = "val_budget/budgets_reached"
VAL_BUDGET_INTERVAL = "val_budget/interval"
# The cumulative generated rollouts (as CUMULATIVE_SAMPLED) of the policy validated: the point's actual x.
VAL_BUDGET_ROLLOUTS = "val_budget/cumulative_rollouts_sample"

# --- verl's own, read by the tools -----------------------------------------------------------------------------------
STEP_TIME = "timing_s/step"
# Validation accuracy per benchmark (data source), over N samples a prompt.
VAL_CORE_ACC = re.compile(r"^val-core/(?P<source>.+)/acc/mean@(?P<n>\d+)$")
