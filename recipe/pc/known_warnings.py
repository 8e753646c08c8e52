"""verl's start-up messages that say nothing about a Pilot-Commit run, filtered before verl is imported.

``recipe.pc.main_pc`` calls :func:`filter_known_warnings` before its first verl import, so a dry run's first lines are
the recipe's own. Anything not listed here still prints.
"""

from __future__ import annotations

import logging
import re
import warnings

# (where it is emitted: "warnings" or a logger's name, a regular expression matched at the message's start)
KNOWN_VERL_WARNINGS = (
    # verl/workers/engine/__init__.py, at import: optional training engines whose packages are not installed;
    # the recipe trains with FSDP.
    ("warnings", r"(torchtitan|veomni|automodel|mindspeed|megatron) engine is not available"),
    # verl/trainer/ppo/utils.py need_critic: GRPO-style estimators never use a critic.
    ("warnings", r"Disabled critic as algorithm\.adv_estimator != gae"),
    # verl/utils/import_utils.py deprecated(), when RayPCTrainer is built: the recipe runs on verl 0.9.1's legacy
    # trainer on purpose (recipe/pc/main_pc.py) and pins that version.
    ("warnings", r"Warning: Class 'verl\.trainer\.ppo\.ray_trainer\.RayPPOTrainer' is deprecated"),
    # verl/plugin/platform/platform_manager.py, on a machine without an accelerator (a dry run); a launch without
    # a GPU is stopped by main_pc's own check with one line.
    ("verl.plugin.platform.platform_manager", r"No supported accelerator detected"),
    # The same module in CPU-only processes: the dry run, the TaskRunner actor (num_cpus=1, no GPU by design).
    ("verl.plugin.platform.platform_manager", r"Platform '\w+' \(\w+\) is registered but not available"),
)


class _DropMatching(logging.Filter):
    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


def filter_known_warnings() -> None:
    """Drop the messages of ``KNOWN_VERL_WARNINGS`` in this process; calling it again adds nothing."""
    for source, pattern in KNOWN_VERL_WARNINGS:
        if source == "warnings":
            warnings.filterwarnings("ignore", message=pattern)  # filterwarnings replaces an identical filter
            continue
        log = logging.getLogger(source)
        if not any(isinstance(f, _DropMatching) and f.pattern.pattern == pattern for f in log.filters):
            log.addFilter(_DropMatching(pattern))
