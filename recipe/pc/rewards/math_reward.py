"""Score a math response by its last ``\\boxed{...}`` answer, graded against the ground truth with math-verify.

Select it in Hydra with::

    reward.custom_reward_function.path=pkg://recipe.pc.rewards.math_reward
    reward.custom_reward_function.name=compute_score
    reward.reward_manager.name=dapo
    # optional, passed through to compute_score:
    +reward.custom_reward_function.reward_kwargs.timeout_s=5.0
    +reward.custom_reward_function.reward_kwargs.grader=math_dapo

Returns verl's dict form ``{"score": 1.0 or -1.0, "acc": bool, "pred": str}``. The DAPO reward manager puts the
whole dict into ``reward_extra_info`` and adds its overlong penalty (``reward.reward_kwargs.overlong_buffer_cfg.*``:
enable, len, penalty_factor, log; plus ``reward.reward_kwargs.max_resp_len``) to ``score`` only, so ``acc``, which
drives the pilot band, stays the verifier's verdict.

Extraction: the last ``\\boxed`` or ``\\fbox`` in the response decides. Its braced argument is found by brace
matching from that command on (``\\{``/``\\}`` don't count), so stray braces earlier in the text don't matter; a final
box that is never closed counts as no box. ``\\boxed 5`` without braces takes the text up to ``$``, a newline, ``\\]``
or ``\\)``. Only the last 2000 characters of the answer are graded.

A row's ground truth never stops a run (the start-up checks count the rows whose ground truth is empty, missing or
not a string). ``grader="reference"`` scores them as the authors' grader did (``reference_grader.py``); the other
graders grade a string, stripped, or a number as it prints, and score anything else (None, blank, a bool, a list)
-1 with ``pred`` ``[NO_GROUND_TRUTH]``, wrong for every rollout, so the group carries no gradient.

Graders (kwarg ``grader``):

- ``"math_verify"`` (default): math-verify's ``parse``/``verify`` in a few helper processes (``grader_pool.py``)
  that are killed after ``timeout_s`` seconds of grading.
- ``"reference"``: the authors' grader as it behaved in their runs (``reference_grader.py``), its own extraction,
  normalisations and 1 s timeout included.
- ``"math_dapo"``: verl's ``verl.utils.reward_score.math_dapo.compute_score`` (normalised string match on the last
  300 characters), for comparison with the DAPO baselines.
"""

from __future__ import annotations

import logging
import numbers
import re

from recipe.pc.rewards import grader_pool, reference_grader
from recipe.pc.rewards.grader_pool import GraderStartupError

logger = logging.getLogger(__name__)

NO_BOX = "[NO_BOXED_FOUND]"
TIMEOUT = "[TIMEOUT]"
NO_GROUND_TRUTH = "[NO_GROUND_TRUTH]"
GRADERS = ("math_verify", "math_dapo", "reference")
# The packages each grader imports, as (module, the distribution pip installs it from): the start-up checks
# (recipe.pc.main_pc) name a missing one before a run starts. pyproject.toml's `math` extra installs them all.
GRADER_PACKAGES = {
    "math_verify": (("math_verify", "math-verify"),),
    "reference": (("pylatexenc", "pylatexenc"), ("sympy", "sympy")),
    "math_dapo": (),
}

# Real answers are short; grading only the tail keeps megabyte-long "answers" cheap to ship and parse.
_MAX_ANSWER_CHARS = 2000

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_WHITESPACE = re.compile(r"\s*")
# Escaped braces and backslashes are skipped as pairs, so `\{` never opens a group but `\\{` does.
_BRACE_TOKEN = re.compile(r"\\[{}\\]|[{}]")
_UNBRACED_END = re.compile(r"\$|\n|\\\]|\\\)")


def extract_boxed_answer(text: str) -> str | None:
    """The stripped argument of the last ``\\boxed``/``\\fbox`` in ``text``; None if there is none or it is unclosed."""
    start = _last_box_argument_start(text)
    if start < 0:
        return None
    start = _WHITESPACE.match(text, start).end()
    if start == len(text) or text[start] != "{":
        end = _UNBRACED_END.search(text, start)
        return text[start : end.start() if end else len(text)].strip()
    depth = 0
    for token in _BRACE_TOKEN.finditer(text, start):
        if token.group() == "{":
            depth += 1
        elif token.group() == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : token.start()].strip()
    return None


def _last_box_argument_start(text: str) -> int:
    """Index just past the last box command name (not a longer command such as ``\\boxedsymbol``), or -1."""
    best = -1
    for command in _BOX_COMMANDS:
        end = len(text)
        while (found := text.rfind(command, 0, end)) >= 0:
            after = found + len(command)
            if after == len(text) or not text[after].isalpha():
                best = max(best, after)
                break
            end = found
    return best


def compute_score(
    data_source,
    solution_str,
    ground_truth,
    extra_info=None,
    *,
    grader: str = "math_verify",
    timeout_s: float = 5.0,
    **kwargs,
) -> dict:
    if grader not in GRADERS:
        raise ValueError(f"math_reward: unknown grader={grader!r} (reward_kwargs.grader); expected one of {GRADERS}")
    if not timeout_s or timeout_s <= 0:
        raise ValueError(f"math_reward: timeout_s must be a positive number of seconds, got {timeout_s!r}")
    if grader == "reference":  # the authors' grader, quirks and its own 1 s timeout included; it sees the raw truth
        return reference_grader.compute_score(solution_str, ground_truth)
    gold = gold_text(ground_truth)
    if gold is None:  # a data error that must not stop a run: the start-up checks count these rows
        return _result(False, NO_GROUND_TRUTH)
    if grader == "math_dapo":
        return _grade_math_dapo(solution_str, gold)

    answer = extract_boxed_answer(solution_str)
    if answer is None:
        return _result(False, NO_BOX)
    answer = answer[-_MAX_ANSWER_CHARS:]
    if not answer:
        return _result(False, "")
    try:
        reply = grader_pool.pool("math_verify").ask([answer, gold], timeout_s)
    except GraderStartupError:
        raise
    except TimeoutError:
        logger.debug("math-verify took over %.1fs on %r vs %r", timeout_s, answer[:200], gold)
        return _result(False, TIMEOUT)
    except Exception:
        logger.debug("math-verify grader process failed on %r vs %r", answer[:200], gold, exc_info=True)
        return _result(False, answer)
    if "error" in reply:
        logger.debug("math-verify raised on %r vs %r: %s", answer[:200], gold, reply["error"])
        return _result(False, answer)
    return _result(reply["value"], answer)


def gold_text(ground_truth) -> str | None:
    """The ground truth as the text to grade against: a string stripped, a number as it prints; None when there is
    none to grade against (None, blank, a bool, anything else)."""
    if isinstance(ground_truth, str):
        return ground_truth.strip() or None
    if isinstance(ground_truth, numbers.Real) and not isinstance(ground_truth, bool):
        return str(ground_truth)
    return None


def _result(acc: bool, pred: str) -> dict:
    return {"score": 1.0 if acc else -1.0, "acc": bool(acc), "pred": pred}


def _grade_math_dapo(solution_str: str, gold: str) -> dict:
    from verl.utils.reward_score import math_dapo

    try:
        result = math_dapo.compute_score(solution_str, gold)
    except Exception:
        logger.debug("math_dapo raised on ground truth %r", gold, exc_info=True)
        return _result(False, "")
    return {"score": float(result["score"]), "acc": bool(result["acc"]), "pred": str(result["pred"])}
