"""Helper processes for the slow, unkillable part of grading: math-verify and sympy.

Both can run for minutes on a hostile answer, and their own timeouts use SIGALRM, which only works in the main
thread, while verl's reward loop grades from executor threads. So the parent sends one JSON request a line to a
helper process (this file run as a script) and kills the helper when no reply comes in time.

Tasks (the script's one argument):

- ``math_verify``: ``[answer, gold]`` -> whether math-verify's ``verify`` accepts ``answer`` for ``gold``;
- ``sympy_zero``: ``[expr]`` -> whether sympy simplifies ``expr`` to 0 (the reference grader's symbolic check).

A reply is ``{"value": bool}``, or ``{"error": "..."}`` when the task raised.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
from collections.abc import Callable

# Importing sympy and math-verify takes about a second, more on a loaded node; not counted against a timeout.
_STARTUP_TIMEOUT_S = 120.0
_MAX_PROCESSES = max(1, min(4, os.cpu_count() or 1))


def math_verify_equal(answer: str, gold: str) -> bool:
    """math-verify's verdict with its SIGALRM timeouts off; runs only inside a helper process."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    config = [LatexExtractionConfig(), ExprExtractionConfig()]
    gold_parsed = parse(_delimit(gold), extraction_config=config, parsing_timeout=None)
    answer_parsed = parse(_delimit(answer), extraction_config=config, parsing_timeout=None)
    return bool(verify(gold_parsed, answer_parsed, timeout_seconds=None))


def _delimit(expr: str) -> str:
    # math-verify only parses delimited maths. `$...$` accepts more forms ("5.", "10\%") than \boxed{}, but a `$`
    # inside the expression would close it early, so those go in \boxed{}, which math-verify brace-matches.
    return f"\\boxed{{{expr}}}" if "$" in expr else f"${expr}$"


def sympy_is_zero(expr: str) -> bool:
    """Whether ``expr`` (``^`` for powers, implicit products allowed) simplifies to 0."""
    import sympy
    from sympy.parsing import sympy_parser

    transformations = sympy_parser.standard_transformations + (sympy_parser.implicit_multiplication_application,)
    return bool(sympy.simplify(sympy_parser.parse_expr(expr.replace("^", "**"), transformations=transformations)) == 0)


TASKS = {"math_verify": (math_verify_equal, ("1", "1")), "sympy_zero": (sympy_is_zero, ("x-x",))}


class GraderStartupError(RuntimeError):
    """A helper could not start: a setup problem (e.g. math-verify missing), not a wrong answer."""


class _Helper:
    """One helper process: a JSON request per stdin line, a JSON reply per stdout line."""

    def __init__(self, task: str) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), task], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            if self._read_reply(_STARTUP_TIMEOUT_S) != {"ready": True}:
                raise RuntimeError("unexpected first reply")
        except Exception as err:
            self.kill()
            raise GraderStartupError(
                f"the {task} grader process did not start ({err!r}); are its packages installed for "
                f"{sys.executable}? Its stderr is above."
            ) from err

    def ask(self, args: list, timeout_s: float) -> dict:
        self._proc.stdin.write(json.dumps(args).encode() + b"\n")
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


class GraderPool:
    """Up to ``size`` helpers of one task shared by all threads; a helper that times out or breaks is killed alone.

    The timeout covers only a helper's own work, never the wait for a free helper, so a busy pool can't turn
    slow queueing into false timeouts.
    """

    def __init__(self, task: str, size: int = _MAX_PROCESSES) -> None:
        if task not in TASKS:
            raise ValueError(f"unknown grader task {task!r}; expected one of {sorted(TASKS)}")
        self.task = task
        self._size = size
        self._idle: list[_Helper] = []
        self._live = 0
        self._cond = threading.Condition()

    def ask(self, args: list, timeout_s: float | Callable[[], float]) -> dict:
        """The helper's reply; TimeoutError when it took longer than ``timeout_s`` (the helper is then killed).

        ``timeout_s`` may be a function, called once a helper is free: a caller with a budget of its own reads what
        is left of it then, so the wait for a helper is not taken from it."""
        helper = self._acquire()
        healthy = False
        try:
            reply = helper.ask(args, timeout_s() if callable(timeout_s) else timeout_s)
            healthy = True
            return reply
        finally:
            self._release(helper, healthy)

    def _acquire(self) -> _Helper:
        with self._cond:
            while not self._idle and self._live >= self._size:
                self._cond.wait()
            if self._idle:
                return self._idle.pop()
            self._live += 1
        try:
            return _Helper(self.task)
        except BaseException:
            self._release(None, healthy=False)
            raise

    def _release(self, helper: _Helper | None, healthy: bool) -> None:
        if helper is not None and not healthy:
            # It may still be deep in sympy: only killing the process really stops it.
            helper.kill()
        with self._cond:
            if healthy:
                self._idle.append(helper)
            else:
                self._live -= 1
            self._cond.notify()


_pools: dict[str, GraderPool] = {}
_pools_lock = threading.Lock()


def pool(task: str) -> GraderPool:
    """The process-wide pool for ``task``, started on first use."""
    with _pools_lock:
        if task not in _pools:
            _pools[task] = GraderPool(task)
        return _pools[task]


def _forget_pools_after_fork() -> None:
    # A forked child must not share the parent's helper pipes (or a lock held at fork time): it starts its own.
    global _pools, _pools_lock
    _pools = {}
    _pools_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools_after_fork)


def _serve(task: str) -> None:
    """Helper main loop; exits when the parent closes stdin (or dies)."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    # Stray prints from sympy or math-verify go to stderr instead of corrupting the reply stream.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    # The parent enforces the timeout, so math-verify's "timeout is disabled" warning is noise here.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    function, warm_up = TASKS[task]
    # Import the libraries (and math-verify's LaTeX grammar) before the parent starts timing requests.
    function(*warm_up)
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    for line in sys.stdin:
        try:
            reply = {"value": function(*json.loads(line))}
        except Exception as err:
            reply = {"error": f"{type(err).__name__}: {err}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    _serve(sys.argv[1])
