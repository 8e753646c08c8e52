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

Graders (kwarg ``grader``):

- ``"math_verify"`` (default): math-verify's ``parse``/``verify`` in a few helper processes (this file run as a
  script) that are killed after ``timeout_s`` seconds of grading. math-verify's own timeout uses SIGALRM, which only
  works in the main thread, and the reward manager calls this function from executor threads.
- ``"reference"``: the authors' grader as it behaved in their runs (``reference_grader.py``): normalised
  string equality on the last box, -1 for an unmatched ``}`` anywhere, 1 s timeout.
- ``"math_dapo"``: verl's ``verl.utils.reward_score.math_dapo.compute_score`` (normalised string match on the last
  300 characters), for comparison with the DAPO baselines.
"""

from __future__ import annotations

import json
import logging
import os
import re
import select
import subprocess
import sys
import threading

logger = logging.getLogger(__name__)

NO_BOX = "[NO_BOXED_FOUND]"
TIMEOUT = "[TIMEOUT]"
GRADERS = ("math_verify", "math_dapo", "reference")

# Real answers are short; grading only the tail keeps megabyte-long "answers" cheap to ship and parse.
_MAX_ANSWER_CHARS = 2000
# Importing sympy and math-verify takes about a second, more on a loaded node; not counted against timeout_s.
_STARTUP_TIMEOUT_S = 120.0
_MAX_GRADER_PROCESSES = max(1, min(4, os.cpu_count() or 1))

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
    gold = "" if ground_truth is None else str(ground_truth).strip()
    if not gold:
        index = (extra_info or {}).get("index")
        raise ValueError(
            f"math_reward: empty ground truth {ground_truth!r} for data_source={data_source!r}, "
            f"extra_info.index={index!r}"
        )

    if grader == "math_dapo":
        return _grade_math_dapo(solution_str, gold)
    if grader == "reference":  # the authors' grader, quirks and its own 1 s timeout included
        # Imported here: this file also runs as a plain script (the math-verify helper), without the package.
        from recipe.pc.rewards import reference_grader

        return reference_grader.compute_score(solution_str, gold)

    answer = extract_boxed_answer(solution_str)
    if answer is None:
        return _result(False, NO_BOX)
    answer = answer[-_MAX_ANSWER_CHARS:]
    if not answer:
        return _result(False, "")
    try:
        reply = _get_pool().grade(answer, gold, timeout_s)
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
    return _result(reply["acc"], answer)


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


def _math_verify_equal(answer: str, gold: str) -> bool:
    """math-verify's verdict with its SIGALRM timeouts off; runs only inside a grader process."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    config = [LatexExtractionConfig(), ExprExtractionConfig()]
    gold_parsed = parse(_delimit(gold), extraction_config=config, parsing_timeout=None)
    answer_parsed = parse(_delimit(answer), extraction_config=config, parsing_timeout=None)
    return bool(verify(gold_parsed, answer_parsed, timeout_seconds=None))


def _delimit(expr: str) -> str:
    # math-verify only parses delimited maths. `$...$` accepts more forms ("5.", "10\%") than \boxed{}, but a `$`
    # inside the expression would close it early, so those go in \boxed{}, which math-verify brace-matches.
    return f"\\boxed{{{expr}}}" if "$" in expr else f"${expr}$"


class GraderStartupError(RuntimeError):
    """A grader process could not start: a setup problem (e.g. math-verify missing), not a wrong answer."""


class _GraderProcess:
    """This file run as a script: one JSON ``[answer, gold]`` request per stdin line, one JSON reply per stdout line."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            if self._read_reply(_STARTUP_TIMEOUT_S) != {"ready": True}:
                raise RuntimeError("unexpected first reply")
        except Exception as err:
            self.kill()
            raise GraderStartupError(
                f"math_reward: the math-verify grader process did not start ({err!r}); is math-verify installed "
                f"for {sys.executable}? Its stderr is above."
            ) from err

    def grade(self, answer: str, gold: str, timeout_s: float) -> dict:
        self._proc.stdin.write(json.dumps([answer, gold]).encode() + b"\n")
        self._proc.stdin.flush()
        return self._read_reply(timeout_s)

    def _read_reply(self, timeout_s: float) -> dict:
        # One request is in flight at a time, so the reader's buffer is empty whenever we wait here.
        readable, _, _ = select.select([self._proc.stdout], [], [], timeout_s)
        if not readable:
            raise TimeoutError(f"no reply within {timeout_s}s")
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"grader process exited with code {self._proc.wait()}")
        return json.loads(line)

    def kill(self) -> None:
        self._proc.kill()
        self._proc.wait()
        self._proc.stdin.close()
        self._proc.stdout.close()


class _GraderPool:
    """Up to ``size`` grader processes shared by all threads; a process that times out or breaks is killed alone.

    The timeout covers only a process's own work, never the wait for a free process, so a busy pool can't turn
    slow queueing into false timeouts.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._idle: list[_GraderProcess] = []
        self._live = 0
        self._cond = threading.Condition()

    def grade(self, answer: str, gold: str, timeout_s: float) -> dict:
        process = self._acquire()
        healthy = False
        try:
            reply = process.grade(answer, gold, timeout_s)
            healthy = True
            return reply
        finally:
            self._release(process, healthy)

    def _acquire(self) -> _GraderProcess:
        with self._cond:
            while not self._idle and self._live >= self._size:
                self._cond.wait()
            if self._idle:
                return self._idle.pop()
            self._live += 1
        try:
            return _GraderProcess()
        except BaseException:
            self._release(None, healthy=False)
            raise

    def _release(self, process: _GraderProcess | None, healthy: bool) -> None:
        if process is not None and not healthy:
            # It may still be deep in sympy: only killing the process really stops it.
            process.kill()
        with self._cond:
            if healthy:
                self._idle.append(process)
            else:
                self._live -= 1
            self._cond.notify()


_pool: _GraderPool | None = None
_pool_lock = threading.Lock()


def _get_pool() -> _GraderPool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _GraderPool(_MAX_GRADER_PROCESSES)
        return _pool


def _forget_pool_after_fork() -> None:
    # A forked child must not share the parent's grader pipes (or a lock held at fork time): it starts its own pool.
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _serve() -> None:
    """Grader process main loop; exits when the parent closes stdin (or dies)."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    # Stray prints from sympy or math-verify go to stderr instead of corrupting the reply stream.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    # The parent enforces the timeout, so math-verify's "timeout is disabled" warning is noise here.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    # Import sympy/math-verify and load the LaTeX grammar before the parent starts timing requests.
    _math_verify_equal("1", "1")
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    for line in sys.stdin:
        answer, gold = json.loads(line)
        try:
            reply = {"acc": _math_verify_equal(answer, gold)}
        except Exception as err:
            reply = {"error": f"{type(err).__name__}: {err}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    _serve()
