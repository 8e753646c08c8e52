"""The tools' defaults for Pilot-Commit keys, read from the trainer's YAML (``recipe/pc/config/pc_trainer.yaml``,
through ``recipe.pc.settings.yaml_defaults``), so that a prediction made with no option models the trainer run with
no override."""

from __future__ import annotations

import recipe.pc.allocators  # noqa: F401  (registers the allocators' key groups, which yaml_defaults reads)
from recipe.pc.settings import yaml_defaults
from recipe.pc.stages.skip import SkipSettings

_ALGORITHM = yaml_defaults().algorithm

P_LOWER: float = _ALGORITHM.diversity_threshold_lower  # algorithm.diversity_threshold_lower
P_UPPER: float = _ALGORITHM.diversity_threshold_upper  # algorithm.diversity_threshold_upper
MAX_OFF_STEPS: int = _ALGORITHM.buffer_max_off_steps  # algorithm.buffer_max_off_steps
MAX_ROUNDS: int = _ALGORITHM.max_num_gen_batches  # algorithm.max_num_gen_batches (<= 0: unlimited)
AGG_METRIC: str = _ALGORITHM.agg_metric  # the per-rollout metric of the pilot band and the filters
SKIP: SkipSettings = SkipSettings.read(yaml_defaults())  # algorithm.skip.*, the rule the simulator skips with
