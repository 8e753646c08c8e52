"""Validation metrics without verl's bootstraps (``trainer.val_metrics``).

verl 0.9.1 turns a validation's per-sample scores into metrics with ``process_validation_metrics``: per prompt the
mean and standard deviation of each numeric reward field over its N samples, then ``best@k``, ``worst@k`` and
``maj@k`` for k = 2, 4, ..., N, each a 1,000-fold bootstrap run in a Python loop, averaged over prompts. On 200
prompts x 8 samples the bootstraps take most of a validation's driver time, and the curves, the report and the
pre-registered readings use ``val-core/<source>/acc/mean@N`` alone.

``trainer.val_metrics=mean`` (the default) computes ``mean@N`` and ``std@N`` exactly as verl does (same grouping by
data source and prompt uid, same skipping of missing and text values, same average over prompts) and files them under
the same names (``val-core`` / ``val-aux`` by verl's rule), so old and new logs read alike. ``full`` runs verl's own
function: ``best@k``, ``worst@k`` and ``maj@k`` come back.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

VAL_METRICS = ("mean", "full")


def mean_validation_metrics(data_sources, sample_uids, infos_dict: dict[str, list]) -> dict:
    """``{data_source: {field: {"mean@N": v, "std@N": v}}}``: the part of verl's ``process_validation_metrics``
    (``verl/trainer/ppo/metric_utils.py``) that needs no bootstrap, with its keys and values."""
    grouped: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for i, source in enumerate(data_sources):
        fields = grouped[source][sample_uids[i]]
        for name, values in infos_dict.items():
            fields[name].append(values[i])

    # Per data source and field, each prompt's statistics, then their mean over prompts (verl's order of operations).
    per_prompt: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for source, prompts in grouped.items():
        for fields in prompts.values():
            for name, values in fields.items():
                values = [v for v in values if v is not None]
                if not values or isinstance(values[0], str):  # verl skips text fields (e.g. the parsed answer)
                    continue
                n = len(values)
                per_prompt[source][name][f"mean@{n}"].append(float(np.mean(values)))
                if n > 1:
                    per_prompt[source][name][f"std@{n}"].append(float(np.std(values)))
    return {
        source: {name: {metric: np.mean(vals) for metric, vals in metrics.items()} for name, metrics in fields.items()}
        for source, fields in per_prompt.items()
    }


def sectioned(nested: dict) -> dict:
    """verl's metric names for ``nested`` (``RayPPOTrainer._val_metrics_update``): ``val-core`` for the mean, best
    and majority at the largest N of the source's ``acc`` field (``reward`` when it has none), ``val-aux`` otherwise."""
    flat = {}
    for source, fields in nested.items():
        core = "acc" if "acc" in fields else "reward"
        for name, metrics in fields.items():
            n_max = max(int(metric.split("@")[-1].split("/")[0]) for metric in metrics)
            for metric, value in metrics.items():
                is_core = name == core and metric.startswith(("mean", "maj", "best")) and f"@{n_max}" in metric
                flat[f"{'val-core' if is_core else 'val-aux'}/{source}/{name}/{metric}"] = value
    return flat


def turn_metrics(sample_turns: list) -> dict:
    """verl's ``val-aux/num_turns/*`` from the per-batch turn counts (none when the rollouts report none)."""
    if not sample_turns:
        return {}
    turns = np.concatenate(sample_turns)
    return {
        "val-aux/num_turns/min": turns.min(),
        "val-aux/num_turns/max": turns.max(),
        "val-aux/num_turns/mean": turns.mean(),
    }
