"""The authors' answer grader (``GRADER=reference``), written from how it behaves.

Every run of the Pilot-Commit release is graded by its ``tinker_sympy`` verifier, a PRM800K-style grader. The last
``\\boxed{...}`` of a response is the answer. It is correct if any of these holds, tried in order:

1. it and the ground truth are the same string after the MATH ("mathd") normalisation (:func:`mathd_normalize`);
2. they are the same string after a second, looser normalisation (:func:`loose_normalize`: LaTeX to plain text,
   unit words dropped, mixed numbers, lower case);
3. element by element (tuples and intervals; anything else is one element): fractions must match literally, an
   integer never matches a non-integer, and other elements go to sympy behind a gate (:func:`sympy_gate_open`).

The quirks are kept, because they decided the numbers the paper reports:

- an unmatched ``}`` anywhere in the response voids it (-1, ``[NO_BOXED_FOUND]``), even after a good final box;
  ``\\boxed x`` without braces is read only when no braced box exists, and then the first one;
- the sympy gate's last condition is inverted: it opens only when the expression has both a stacked power and a
  multi-digit exponent (``x^12^1``), so ``2*3`` vs ``6`` or ``x+1`` vs ``1+x`` are rejected;
- ``2 1/2`` is read as 21/2 by the first normalisation and as 2 + 1/2 by the second; ``\\text{a} or \\text{b}``
  unwraps to ``a} or \\text{b``; a normalisation that fails part-way keeps its input as it was.

Ground truths: an empty or blank one is graded as a string; None never matches (-1 with the answer as ``pred``);
anything else that is not a string scores -1 with ``pred`` ``[TIMEOUT]`` (the release's ``.strip()`` raised inside
its timeout wrapper). A response without a box scores ``[NO_BOXED_FOUND]`` whatever the ground truth.

The grading of one extracted answer has a 1 s budget (:class:`Budget`), the release's one SIGALRM per grade. What
happens when it runs out depends on where, as in the release, whose ``try`` blocks swallowed the alarm in some places:

- in the MATH normalisation of either string: that normalisation keeps its input, and grading goes on;
- in the LaTeX-to-text step of the second normalisation: the step is dropped, and grading goes on;
- in the sympy check: "not equal", so -1 with the answer as ``pred``;
- anywhere else (the rest of the second normalisation, the element-wise comparison): -1 with ``pred`` ``[TIMEOUT]``.

An alarm fires once: after one was swallowed the release graded on without a limit. Here a later sympy check still
gets ``TIMEOUT_S`` of its own, so that no answer can hold a helper forever. Any other failure while grading is scored
as the release scores it, -1 with ``pred`` ``[TIMEOUT]``.
"""

from __future__ import annotations

import logging
import re
import time

from recipe.pc.rewards import grader_pool

logger = logging.getLogger(__name__)

NO_BOX = "[NO_BOXED_FOUND]"
TIMEOUT = "[TIMEOUT]"
TIMEOUT_S = 1.0

# The grading thread's own CPU time: time spent waiting for the GIL or for a free helper is not the grade's work.
_cpu_time = time.thread_time


class _Alarm(Exception):
    """The budget ran out: raised where the release's SIGALRM would have interrupted the grade. An ``Exception``, so
    the places whose ``except Exception`` swallowed the release's alarm swallow this one too."""


class Budget:
    """The release's 1 s alarm for one grade, counted from the start of grading (after extraction).

    It is spent by the grading thread's CPU time and by the wall time a sympy helper works on the grade; ``check`` is
    called where one part of the grade ends and raises ``_Alarm`` the first time the budget is spent, so the part
    that was running when it ran out decides the outcome. It never fires again after that.
    """

    def __init__(self, seconds: float = TIMEOUT_S) -> None:
        self.seconds = float(seconds)
        self.left = self.seconds
        self.fired = False
        self._since = _cpu_time()
        self._helper_since: float | None = None

    def check(self) -> None:
        if self.fired:
            return
        now = _cpu_time()
        self.left -= now - self._since
        self._since = now
        if self.left <= 0:
            self.fired = True
            raise _Alarm

    def helper_timeout(self) -> float:
        """Seconds a helper may work, read once it is free (the wait for it is not counted); starts its clock."""
        self._helper_since = time.monotonic()
        return self.seconds if self.fired else max(self.left, 0.0)

    def helper_done(self) -> None:
        """Charge the helper's working time, if it started."""
        if self._helper_since is not None:
            self.left -= time.monotonic() - self._helper_since
            self._helper_since = None
        self._since = _cpu_time()


# --- extraction --------------------------------------------------------------------------------------------------

_BRACE = re.compile(r"[{}]")
_BARE_BOX = re.compile(r"\\boxed\s+([a-zA-Z0-9]+)")


def extract_answer(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` to close; None when there is none or any ``}`` is unmatched."""
    open_at: list[int] = []
    answer = None
    for brace in _BRACE.finditer(text):
        if brace.group() == "{":
            open_at.append(brace.start())
        elif not open_at:
            return None  # escaped or not, a stray "}" anywhere voids the response
        else:
            start = open_at.pop()
            if text.endswith("\\boxed", 0, start):
                answer = text[start + 1 : brace.start()]
    if answer is not None:
        return answer
    bare = _BARE_BOX.search(text)
    return bare.group(1) if bare else None


# --- stage 1: the MATH normalisation -------------------------------------------------------------------------------


class _Unnormalizable(Exception):
    """A step of the MATH normalisation cannot handle the string: the release then keeps its input."""


# Literal rewrites, in the release's order, before and after the units on the right are cut off.
_MATHD_BEFORE_UNITS = [
    ("\n", ""),
    ("\\!", ""),
    ("\\\\", "\\"),
    ("tfrac", "frac"),
    ("dfrac", "frac"),
    ("\\left", ""),
    ("\\right", ""),
    ("^{\\circ}", ""),
    ("^\\circ", ""),
    ("\\$", ""),
]
# The release removes \% twice: one that the first removal brings together goes too (\\%% -> "").
_MATHD_AFTER_UNITS = [("\\%", ""), ("\\%", ""), (" .", " 0."), ("{.", "{0.")]
_WHOLE_TEXT = re.compile(r"^\\text\{(?P<inner>.+?)\}$")
_UNIT_MARK = "\\text{ "
_SQRT_WITHOUT_ARGUMENT = re.compile(r"\\sqrt(?=\\sqrt|\Z)")
_SQRT_BARE_ARGUMENT = re.compile(r"\\sqrt([^{])", re.DOTALL)


def _replace_all(s: str, rewrites: list[tuple[str, str]]) -> str:
    for old, new in rewrites:
        s = s.replace(old, new)
    return s


def _cut_units(s: str) -> str:
    # The MATH data writes units as "\text{ cm}" after the number; more than one such mark is not handled.
    if _UNIT_MARK not in s:
        return s
    number, *units = s.split(_UNIT_MARK)
    if len(units) != 1:
        raise _Unnormalizable("several unit marks")
    return number


def _drop_short_assignment(s: str) -> str:
    # "k = 5" -> " 5": one "=" with at most two characters before it.
    left, sep, right = s.partition("=")
    return right if sep and "=" not in right and len(left) <= 2 else s


def _brace_sqrt(s: str) -> str:
    # \sqrt3 -> \sqrt{3}; the character after \sqrt is taken whatever it is (a space too).
    if _SQRT_WITHOUT_ARGUMENT.search(s):
        raise _Unnormalizable("\\sqrt without an argument")
    return _SQRT_BARE_ARGUMENT.sub(r"\\sqrt{\1}", s)


def _brace_fracs(s: str) -> str:
    # \frac12 -> \frac{1}{2}, \frac1{72} -> \frac{1}{72}; a one-character argument leaves the whole string alone.
    head, *arguments = s.split("\\frac")
    pieces = [head]
    for argument in arguments:
        if not argument:
            raise _Unnormalizable("\\frac without an argument")
        if argument[0] != "{":
            if len(argument) < 2:
                return s
            numerator, rest = argument[0], argument[1:]
            denominator = rest if rest[0] == "{" else "{" + rest[0] + "}" + rest[1:]
            argument = "{" + numerator + "}" + denominator
        pieces.append("\\frac" + argument)
    return "".join(pieces)


def _slash_to_frac(s: str) -> str:
    # "3/4" -> \frac{3}{4} when both sides are integers that print back as written.
    parts = s.split("/")
    if len(parts) != 2:
        return s
    try:
        numerator, denominator = int(parts[0]), int(parts[1])
    except ValueError:
        return s
    if s != f"{numerator}/{denominator}":
        raise _Unnormalizable("an a/b that does not print back as written")
    return f"\\frac{{{numerator}}}{{{denominator}}}"


def mathd_normalize(answer: str, budget: Budget | None = None) -> str:
    """The first normalisation: the MATH benchmark's string clean-up. Its input, stripped, when a step cannot handle
    the string or the budget runs out during it (the release's ``try`` swallowed its alarm here)."""
    s = answer.strip()
    whole_text = _WHOLE_TEXT.search(s)
    if whole_text:
        s = whole_text["inner"].strip()
    budget = budget or Budget(float("inf"))
    try:
        normalized = _mathd_steps(s)
        budget.check()
        return normalized
    except (_Unnormalizable, _Alarm):
        return s


def _mathd_steps(s: str) -> str:
    s = _cut_units(_replace_all(s, _MATHD_BEFORE_UNITS))
    s = _replace_all(s, _MATHD_AFTER_UNITS)
    if s.startswith("."):
        s = "0" + s
    s = _brace_sqrt(_drop_short_assignment(s)).replace(" ", "")
    s = _brace_fracs(s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    return _slash_to_frac(s)


# --- stage 2: the looser normalisation -----------------------------------------------------------------------------

_LOOSE_REWRITES = [
    ("\\%", "%"),
    ("\\$", "$"),
    ("$", ""),
    ("%", ""),
    (" or ", " , "),
    (" and ", " , "),
    ("million", "*10^6"),
    ("billion", "*10^9"),
    ("trillion", "*10^12"),
]
# Removed one word after the other, anywhere in the string (so "Monday" loses its "day").
_UNIT_WORDS = [
    re.compile(rf"{word}(es)?(s)? *(\^[0-9]+)?")
    for word in "degree cm centimeter meter mile second minute hour day week month year foot feet inch yard".split()
]
_DEGREE_SIGN = re.compile(r"\^ *\\circ")
_THIN_SPACE_AFTER_COMMA = re.compile(r",\\! *")
_MINUS_SPACES = re.compile(r"- *")
_MIXED_NUMBER = re.compile(r"([0-9]) +([0-9])")
_THOUSANDS_COMMA = re.compile(r"(\d)(,)(\d\d\d)($|\D)")
_SYMBOLS = [("√", "sqrt"), ("π", "pi"), ("∞", "inf"), ("∪", "U"), ("·", "*"), ("×", "*")]
_latex_to_text = None


def _near_integer(x: float) -> bool:
    try:
        return abs(x - int(round(x))) <= 1e-7
    except (ValueError, OverflowError):  # nan, inf
        return False


def _as_float(s: str) -> float | None:
    try:
        return float(s)
    except (ValueError, OverflowError):
        return None


def _drop_thousands_commas(s: str) -> str:
    # Only well-formed ones ("1,234,567"), so a tuple's commas stay; each pass frees the next group.
    while (fewer := _THOUSANDS_COMMA.sub(r"\1\3\4", s)) != s:
        s = fewer
    return s


def _is_integer_string(s: str) -> bool:
    value = _as_float(_drop_thousands_commas(s))
    return value is not None and _near_integer(value)


def _latex_as_text(s: str) -> str:
    global _latex_to_text
    if _latex_to_text is None:
        from pylatexenc.latex2text import LatexNodes2Text

        _latex_to_text = LatexNodes2Text()
    s = s.replace("\\tfrac", "\\frac").replace("\\dfrac", "\\frac").replace("\\frac", " \\frac")
    return _replace_all(_latex_to_text.latex_to_text(s), _SYMBOLS).strip()


def loose_normalize(answer: str, budget: Budget | None = None) -> str:
    """The second normalisation: LaTeX to text, units and spacing dropped, integers canonical, lower case.

    ``_Alarm`` when the budget runs out during it, except in the LaTeX-to-text step, which is then dropped (the
    release's ``suppress`` swallowed its alarm there)."""
    budget = budget or Budget(float("inf"))
    s = answer
    whole_text = _WHOLE_TEXT.search(s)
    if whole_text:
        s = whole_text["inner"]
    s = _replace_all(s, _LOOSE_REWRITES)
    for unit in _UNIT_WORDS:
        s = unit.sub("", s)
    s = _DEGREE_SIGN.sub("", s)
    if s.startswith("{") and s.endswith("}"):
        s = s[1:-1]
    s = _THIN_SPACE_AFTER_COMMA.sub("", s)
    value = _as_float(s)
    if value is not None and _near_integer(value):
        s = str(int(round(value)))
    if "\\" in s:
        budget.check()
        try:
            as_text = _latex_as_text(s)
            budget.check()
            s = as_text
        except Exception:  # pylatexenc failed, or the alarm fired inside it: the release kept the string
            pass
    s = _MIXED_NUMBER.sub(r"\1+\2", _MINUS_SPACES.sub("-", s))
    s = s.replace(" ", "").replace("{", "").replace("}", "").lower()
    if _is_integer_string(s):
        s = str(int(float(s.replace(",", ""))))
    budget.check()
    return s


# --- stage 3: element by element -----------------------------------------------------------------------------------

_BRACKETS = "()[]"
_FRACTION = re.compile(r"^-?[0-9]+.?/0*[1-9][0-9]*.?$")
_GATE_SUBSTRINGS = ("^{", "^(")
_GATE_PATTERNS = (re.compile(r"\^[0-9]+\^"), re.compile(r"\^[0-9][0-9]+"))


def split_elements(s: str) -> list[str]:
    """A bracketed list without inner brackets splits at its commas; anything else is one element."""
    s = _drop_thousands_commas(s)
    if not s:
        return []
    inner = s[1:-1]
    if len(s) > 2 and s[0] in _BRACKETS and s[-1] in _BRACKETS and not any(b in inner for b in _BRACKETS):
        return [element.strip() for element in inner.split(",")]
    return [s]


def sympy_gate_open(expr: str) -> bool:
    """Whether the release lets sympy look at ``expr``: few letters, no ``^{``/``^(``, and (inverted) both patterns."""
    letters = {c for c in expr.replace("sqrt", "").replace("frac", "") if c.isalpha()}
    if len(letters) > 2 or any(bad in expr for bad in _GATE_SUBSTRINGS):
        return False
    return all(pattern.search(expr) for pattern in _GATE_PATTERNS)


def _sympy_equal(truth: str, given: str, budget: Budget) -> bool:
    """sympy's verdict behind the gate; "not equal" when the budget runs out here, as the release's check swallowed
    its alarm."""
    expr = f"({truth})-({given})"
    if not sympy_gate_open(expr):
        return False
    try:
        reply = grader_pool.pool("sympy_zero").ask([expr], budget.helper_timeout)
    except TimeoutError:
        budget.fired = True
        return False
    finally:
        budget.helper_done()
    return bool(reply.get("value", False))


def _elements_equal(truth: str, given: str, budget: Budget) -> bool:
    truths, givens = split_elements(truth), split_elements(given)
    if len(truths) != len(givens):
        return False
    if len(truths) > 1 and (truth[0], truth[-1]) != (given[0], given[-1]):
        return False  # [1, 2) is not (1, 2)
    for t, g in zip(truths, givens, strict=True):
        if _FRACTION.search(t) and _FRACTION.search(g):
            equal = t == g  # unreduced fractions must be written the same
        elif _is_integer_string(t) != _is_integer_string(g):
            equal = False
        else:
            budget.check()  # what ran since the last check was outside the sympy check
            equal = _sympy_equal(t, g, budget)
        if not equal:
            return False
    return True


def grade(given: str, truth: str | None, budget: Budget | None = None) -> bool:
    """The release's verdict on an extracted answer ``given`` against the ground truth ``truth`` (None never
    matches); ``_Alarm`` where the release's timeout wrapper would have caught its alarm."""
    budget = budget or Budget(float("inf"))
    truth_mathd = None if truth is None else mathd_normalize(truth, budget)
    if mathd_normalize(given, budget) == truth_mathd:
        return True
    truth_loose = None if truth is None else loose_normalize(truth, budget)
    given_loose = loose_normalize(given, budget)
    if truth_loose is None:
        return False
    if given_loose == truth_loose:
        return True
    if not given_loose:
        return False
    equal = _elements_equal(truth_loose, given_loose, budget)
    budget.check()
    return equal


def compute_score(solution_str: str, ground_truth, timeout_s: float = TIMEOUT_S) -> dict:
    """``{"score": ±1.0, "acc": bool, "pred": str}`` for one response, as the release's reward manager got it."""
    answer = extract_answer(solution_str)
    if answer is None:
        return {"score": -1.0, "acc": False, "pred": NO_BOX}
    if ground_truth is not None and not isinstance(ground_truth, str):
        return {"score": -1.0, "acc": False, "pred": TIMEOUT}  # the release's .strip() raised inside its wrapper
    try:
        correct = grade(answer, ground_truth, Budget(timeout_s))
    except grader_pool.GraderStartupError:
        raise  # a setup problem, not a verdict
    except _Alarm:
        logger.debug("reference grader: over its %.1fs budget on %r vs %r", timeout_s, answer[:200], ground_truth)
        return {"score": -1.0, "acc": False, "pred": TIMEOUT}
    except Exception:
        logger.warning("reference grader failed on %r vs %r", answer[:200], ground_truth, exc_info=True)
        return {"score": -1.0, "acc": False, "pred": TIMEOUT}
    return {"score": 1.0 if correct else -1.0, "acc": correct, "pred": answer}
