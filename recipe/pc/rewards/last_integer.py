"""Score a response by its last integer: for "Reply with just the number" arithmetic prompts.

Use with ``reward.custom_reward_function.path=pkg://recipe.pc.rewards.last_integer`` and
``reward.custom_reward_function.name=compute_score``. Returns verl's dict form, so the reward loop
logs ``score``, ``acc`` and ``pred`` per rollout and ``acc`` drives the pilot band.
"""

from __future__ import annotations

import re

from recipe.pc.rewards.math_reward import gold_text

# An integer, allowing thousands separators ("1,234") and a leading minus sign.
_INTEGER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?!\d)|-?\d+")


def last_integer(text: str) -> int | None:
    matches = _INTEGER.findall(text)
    if not matches:
        return None
    return int(matches[-1].replace(",", ""))


def integer_gold(ground_truth) -> int | None:
    """The ground truth as an integer ("7", 7, 7.0, "1,234"); None when it names none ("seven", "2.5", blank, null,
    a bool): a data error graded as wrong, which must not stop a run."""
    gold = gold_text(ground_truth)
    if gold is None:
        return None
    text = gold.replace(",", "")
    try:
        return int(text)  # exact, however long
    except ValueError:
        pass
    try:
        value = float(text)  # 7.0 as a float prints so
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    predicted = last_integer(solution_str)
    expected = integer_gold(ground_truth)
    correct = predicted is not None and expected is not None and predicted == expected
    return {"score": 1.0 if correct else 0.0, "acc": correct, "pred": "" if predicted is None else str(predicted)}
