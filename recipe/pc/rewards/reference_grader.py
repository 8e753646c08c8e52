"""The reference's grader (``GRADER=reference``), as it behaved in the authors' runs (spec §10, §14.9-10).

The authors vendored tinker-cookbook's PRM800K-style grader. Its symbolic (sympy) check sits behind a
gate whose logic is inverted, so it practically never runs: an answer is correct iff it equals the
ground truth after string normalisation (or element-wise, for tuples and intervals). Written here from
that observable behaviour, quirks kept:

- the last ``\\boxed{...}`` decides, found by brace matching over the whole response; an unmatched ``}``
  anywhere in the response, or no box at all, scores -1 (``\\boxed X`` without braces: the first one);
- grading runs under a 1 s timeout; running out scores -1 with pred ``[TIMEOUT]``;
- ``1/2`` and ``0.5`` match ``\\frac{1}{2}``, but ``x^2 + 2x + 1`` never matches ``(x+1)^2``.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

NO_BOX = "[NO_BOXED_FOUND]"
TIMEOUT = "[TIMEOUT]"
TIMEOUT_S = 1.0

# A grading thread that runs out of time cannot be stopped, only abandoned; a few workers bound the leak.
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="reference-grader")


def extract_last_boxed(text: str) -> str | None:
    """The last ``\\boxed{...}``'s content; None if there is none or any ``}`` in ``text`` is unmatched."""
    depth, open_at, last = 0, [], None
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
            open_at.append(i)
        elif ch == "}":
            if depth == 0:
                return None  # the reference gives up on the whole response
            depth -= 1
            start = open_at.pop()
            if text.endswith("\\boxed", 0, start) or text.endswith("\\boxed ", 0, start):
                last = text[start + 1 : i]
    if last is not None:
        return last
    bare = re.search(r"\\boxed +([^\s$]+)", text)
    return bare.group(1) if bare else None


def _fix_fracs(s: str) -> str:
    # \frac12 -> \frac{1}{2}, \frac1{2} -> \frac{1}{2}
    return re.sub(
        r"\\frac(?:\{([^{}]*)\}|(\w))(?:\{([^{}]*)\}|(\w))", lambda m: f"\\frac{{{m[1] or m[2]}}}{{{m[3] or m[4]}}}", s
    )


def _mathd_normalize(answer: str) -> str:
    s = answer.strip()
    s = re.sub(r"\\text\{\s*([^{}]*)\}", r"\1", s)
    s = s.replace("\\left", "").replace("\\right", "").replace("\\!", "")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("^\\circ", "").replace("^{\\circ}", "").replace("\\$", "").replace("$", "")
    s = s.replace("\\%", "").replace("%", "")
    s = re.sub(r"^\s*[a-zA-Z]\s*=", "", s)  # "x = 5" -> "5"
    s = s.replace(" ", "")
    s = re.sub(r"^(-?\d+)/(\d+)$", r"\\frac{\1}{\2}", s)
    if s.startswith("."):
        s = "0" + s
    if s == "0.5":
        s = "\\frac{1}{2}"
    s = _fix_fracs(s)
    return s.rstrip(".")


def _canonical_number(s: str) -> str:
    plain = s.replace(",", "")
    if re.fullmatch(r"-?\d+(\.0*)?", plain):
        return str(int(float(plain)))
    return s


def _second_normalize(answer: str) -> str:
    s = answer.lower()
    s = re.sub(r"\\(?:text|mathrm|textbf|mbox)\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\[,;: ]", "", s)
    s = re.sub(r"\b(degrees?|units?|cm|meters?|inches|dollars?)\b", "", s)
    s = s.replace("\\left", "").replace("\\right", "").replace("$", "").replace(" ", "")
    return _canonical_number(s.rstrip("."))


def _split_elements(s: str) -> list[str] | None:
    if len(s) > 2 and s[0] in "([" and s[-1] in ")]":
        return [p for p in s[1:-1].split(",")]
    return None


def _strings_match(given: str, truth: str) -> bool:
    if _mathd_normalize(given) == _mathd_normalize(truth):
        return True
    a, b = _second_normalize(given), _second_normalize(truth)
    if a == b:
        return True
    # Tuples and intervals: same brackets and element-wise equal strings (the sympy fallback never opens).
    ea, eb = _split_elements(a), _split_elements(b)
    if ea is None or eb is None or len(ea) != len(eb) or (a[0], a[-1]) != (b[0], b[-1]):
        return False
    return all(_mathd_normalize(x) == _mathd_normalize(y) for x, y in zip(ea, eb, strict=True))


def grade(given: str, truth: str, timeout_s: float = TIMEOUT_S) -> bool | None:
    """True/False, or None when grading ran out of time; any error grades as False."""
    future = _POOL.submit(_strings_match, given, truth)
    try:
        return bool(future.result(timeout=timeout_s))
    except FutureTimeout:
        return None
    except Exception:  # noqa: BLE001 - the reference grades any grader error as incorrect
        return False


def compute_score(solution_str: str, ground_truth: str, timeout_s: float = TIMEOUT_S) -> dict:
    answer = extract_last_boxed(solution_str)
    if answer is None:
        return {"score": -1.0, "acc": False, "pred": NO_BOX}
    verdict = grade(answer, ground_truth, timeout_s)
    if verdict is None:
        return {"score": -1.0, "acc": False, "pred": TIMEOUT}
    return {"score": 1.0 if verdict else -1.0, "acc": verdict, "pred": answer}
