"""Build the grader differential-test corpus: (model response, ground truth) pairs by category.

Writes ``tests/data/grader/corpus.jsonl``, one JSON object a line with the keys ``id``, ``category``,
``response`` (a whole model response containing the answer) and ``ground_truth``. The pairs are written
by hand or generated from small fixed value lists, so the output is identical on every run (no
randomness). Each category mixes pairs a sensible grader should accept with near misses that expose
normalisation differences (``\\text{}`` and units, ``\\left(``, ``dfrac``, ``\\frac12``, ``0.5``,
``x=`` prefixes, ``1,000``, ``^\\circ``, ``\\%``, "million", mixed numbers, ``or``/``and`` lists,
case, spaces, sympy-equal but string-different forms, ...). The ``extraction`` category varies the
response itself (nested and unbalanced braces, ``\\boxed x``, several boxes, ``\\fbox``, no box, empty
box); ``named`` holds twelve fixed pairs the spec discusses.

Labels from the authors' grader are produced separately by ``scripts/grader/label_corpus.py``.

Run from the repository root:

    .venv/bin/python scripts/grader/build_corpus.py [--out tests/data/grader/corpus.jsonl]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

OUT = Path("tests/data/grader/corpus.jsonl")

# Response wrappers; "@@" is replaced by the boxed answer. All braces here are balanced.
TEMPLATES = [
    "Let me solve this step by step.\nAfter simplifying, we obtain the final value.\n"
    "Therefore, the answer is \\boxed{@@}.",
    "We set up the equation and solve it carefully. Substituting back confirms the result.\n\n"
    "Final answer: $\\boxed{@@}$",
    "First, note that $f(x) = \\frac{x}{2}$ is increasing on $[0, 4]$, so the extreme values sit at "
    "the endpoints.\n\n**Answer:** $\\boxed{@@}$\n\nI hope this helps!",
    "<think>\nMultiply both sides by $2$; the terms $\\left(a+b\\right)^{2}$ cancel, leaving a "
    "linear equation.\n</think>\nThe answer is $\\boxed{@@}$.",
    "Using $\\sin^2\\theta + \\cos^2\\theta = 1$, the expression collapses.\nSo the result is\n\\[\\boxed{@@}\\]",
]


def wrap(answer: str, k: int) -> str:
    return TEMPLATES[k % len(TEMPLATES)].replace("@@", answer)


# The pair tables below are laid out by hand for reading; keep the formatter off them.
# fmt: off
def integers_signs():
    pairs = [
        ("5", "5"), ("-5", "5"), ("+5", "5"), ("5", "-5"), ("-5", "-5"), ("- 5", "-5"),
        ("\u22125", "-5"), ("05", "5"), ("5.0", "5"), ("5.00", "5"), ("5.", "5"), ("-0", "0"),
        ("+0", "0"), ("1,000", "1000"), ("1000", "1,000"), ("1{,}000", "1000"), ("1\\,000", "1000"),
        ("1\\!000", "1000"), ("1,000,000", "1000000"), ("1 000", "1000"), ("10^3", "1000"),
        ("1e3", "1000"), ("2*3", "6"), ("2\\cdot 3", "6"), ("2\\times 3", "6"), ("6", "2*3"),
        ("4+1", "5"), ("{5}", "5"), ("\\mathbf{5}", "5"), ("\\textbf{5}", "5"), ("\\text{5}", "5"),
        ("$5$", "5"), (" 5 ", "5"), ("\\left(5\\right)", "5"), ("(5)", "5"), ("5", "6"), ("12", "21"),
        ("100", "1000"), ("-12", "-21"), ("1,00", "100"), ("12,34", "1234"), ("1,2345", "12345"),
        ("\\pm 5", "5"), ("\\pm5", "\\pm 5"), ("5!", "120"), ("7", "7.0"), ("7.5", "7"),
        ("2023", "2,023"), ("-2,023", "-2023"), ("999,999", "999999"), ("5 5", "55"),
        ("-(-5)", "5"), ("|-5|", "5"), ("\\infty", "\\infty"), ("-\\infty", "\\infty"),
    ]
    for n in (3, 17, 42, 108, 256, 4096, 31415):
        pairs += [(str(n), str(n)), (str(n + 1), str(n)), (f"-{n}", str(n)), (f"+{n}", str(n)),
                  (f"{n:,}", str(n)), (str(n), f"{n}.0")]
    pairs += [("7", "42")]
    return pairs


def decimals():
    pairs = [
        ("0.5", "\\frac{1}{2}"), ("\\frac{1}{2}", "0.5"), (".5", "0.5"), ("0.5", ".5"), ("0.50", "0.5"),
        ("-.25", "-0.25"), ("-0.25", "-\\frac{1}{4}"), ("0.25", "\\frac14"), ("0.333", "\\frac{1}{3}"),
        ("0.\\overline{3}", "\\frac{1}{3}"), ("1.0", "1"), ("1.00", "1.0"), ("0.1+0.2", "0.3"),
        ("3.14", "3.140"), ("3.14159", "3.14"), ("2.5", "5/2"), ("2.5", "\\frac{5}{2}"),
        ("1,234.5", "1234.5"), ("1234.5", "1,234.5"), ("3.00001", "3"),
        ("2.9999999999", "3"),
        ("0.05", "5\\%"), ("0.5", "0.6"), ("{.5}", "0.5"), ("x = .5", "0.5"), ("1.5", "1\\frac{1}{2}"),
        ("\\frac{3}{2}", "1.5"), ("0.75", "\\frac{3}{4}"), ("-0.5", "-\\frac{1}{2}"), ("1e-3", "0.001"),
        ("0.001", "10^{-3}"), ("12.30", "12.3"), ("0,5", "0.5"), ("5 \\cdot 10^{-1}", "0.5"),
    ]
    for v in ("0.5", "0.25", "1.5", "2.75", "0.125", "3.2", "12.05", "0.04"):
        pairs += [(v, v), (v + "0", v), (v.lstrip("0") if v.startswith("0") else v + "00", v),
                  (v, str(round(float(v) + 0.01, 4))), (f"\\text{{{v}}}", v)]
    return pairs


def fractions():
    pairs = [
        ("\\frac{1}{2}", "1/2"), ("1/2", "\\frac{1}{2}"), ("\\dfrac{1}{2}", "\\frac{1}{2}"),
        ("\\tfrac12", "\\frac{1}{2}"), ("\\frac12", "\\frac{1}{2}"), ("\\frac 12", "\\frac{1}{2}"),
        ("\\frac{2}{4}", "\\frac{1}{2}"), ("2/4", "1/2"), ("\\frac{-1}{2}", "-\\frac{1}{2}"),
        ("-\\frac{1}{2}", "\\frac{-1}{2}"), ("\\frac{1}{-2}", "-\\frac{1}{2}"), ("-1/2", "\\frac{-1}{2}"),
        ("\\frac{3}{4}", "0.75"), ("\\frac{1}{3}", "\\frac{1}{4}"), ("\\frac{x}{2}", "x/2"),
        ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}"), ("\\frac{10}{3}", "3\\frac{1}{3}"),
        ("\\frac{7}{2}", "3.5"), ("{1}/{2}", "\\frac{1}{2}"), ("\\frac{1}{2}", "\\frac{1}{2}"),
        ("\\frac{1}{12}", "\\frac1{12}"), ("\\frac{12}{1}", "12"), ("\\frac{a}{b}", "a/b"),
        ("\\frac{a+b}{2}", "(a+b)/2"), ("\\frac{1}{2}x", "\\frac{x}{2}"), ("\\cfrac{1}{2}", "\\frac{1}{2}"),
        ("\\frac{6}{8}", "\\frac{3}{4}"), ("\\frac{100}{3}", "33\\frac{1}{3}"),
    ]
    for a, b in ((1, 2), (2, 3), (3, 4), (5, 8), (7, 3), (9, 4), (11, 12), (4, 9)):
        f = f"\\frac{{{a}}}{{{b}}}"
        pairs += [(f, f"{a}/{b}"), (f"\\dfrac{{{a}}}{{{b}}}", f), (f"\\frac{{{2 * a}}}{{{2 * b}}}", f),
                  (f"-{f}", f"\\frac{{-{a}}}{{{b}}}"), (f"\\frac{{{b}}}{{{a}}}", f),
                  (f"\\frac{a}{b}" if b < 10 else f, f)]
    pairs += [("\\frac{1}{2}", "\\frac12"), ("\\dfrac{1}{2}", "1/2"), ("\\frac{1}{2}", "\\frac{2}{4}")]
    return pairs


def roots():
    pairs = [
        ("\\sqrt{2}", "\\sqrt2"), ("\\sqrt2", "\\sqrt{2}"), ("\\sqrt 2", "\\sqrt{2}"), ("\\sqrt{2}", "\\sqrt{3}"),
        ("2\\sqrt{3}", "\\sqrt{12}"), ("\\sqrt{8}", "2\\sqrt2"), ("3\\sqrt{2}", "3 \\sqrt{2}"),
        ("\\sqrt[3]{2}", "2^{1/3}"), ("\\sqrt[3]{8}", "2"), ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}"),
        ("\\sqrt{2}/2", "\\frac{\\sqrt2}{2}"), ("1+\\sqrt{5}", "\\sqrt{5}+1"), ("\\sqrt{x}", "sqrt(x)"),
        ("sqrt(2)", "\\sqrt{2}"), ("\\sqrt{4}", "2"), ("\\sqrt{16}", "4"), ("\\pm\\sqrt{2}", "\\pm \\sqrt{2}"),
        ("\\sqrt{2}", "1.414"), ("2\\sqrt{2}", "\\sqrt{8}"), ("\\sqrt{\\frac{1}{2}}", "\\frac{\\sqrt{2}}{2}"),
        ("\\sqrt{a^2+b^2}", "\\sqrt{a^{2}+b^{2}}"), ("\\sqrt{x+1}", "\\sqrt{1+x}"), ("\\sqrt{13}", "\\sqrt{31}"),
        ("\\dfrac{\\sqrt{3}}{3}", "\\frac{\\sqrt3}{3}"), ("\\sqrt{3}/3", "\\frac{1}{\\sqrt3}"),
        ("4\\sqrt{2}", "4 \\sqrt 2"), ("\\sqrt{2}\\cdot 3", "3\\sqrt{2}"), ("\\sqrt{50}", "5\\sqrt{2}"),
    ]
    for a, r in ((2, 3), (3, 5), (5, 2), (4, 7), (6, 11), (10, 2), (7, 6)):
        s = f"{a}\\sqrt{{{r}}}"
        pairs += [(s, s), (f"{a}\\sqrt{r}", s), (f"{a} \\sqrt {{{r}}}", s), (f"\\sqrt{{{a * a * r}}}", s),
                  (f"{a + 1}\\sqrt{{{r}}}", s), (f"{a}\\sqrt{{{r}}}/2", f"\\frac{{{a}\\sqrt{{{r}}}}}{{2}}")]
    return pairs


def powers():
    pairs = [
        ("e^{2}", "e^2"), ("e^2", "e^{2}"), ("2^{10}", "1024"), ("2^10", "1024"), ("x^2", "x^{2}"),
        ("x^2+1", "1+x^2"), ("2^{n}-1", "2^n-1"), ("3^4", "81"), ("10^{6}", "1000000"), ("10^6", "10^{6}"),
        ("x^{2}y", "yx^2"), ("(x+1)^2", "x^2+2x+1"), ("x^2+2x+1", "(x+1)^2"), ("a^{-1}", "\\frac{1}{a}"),
        ("2^{-1}", "\\frac{1}{2}"), ("x^{1/2}", "\\sqrt{x}"), ("e^{i\\pi}", "-1"), ("2^{2^{3}}", "256"),
        ("x^3", "x^2"), ("n^2", "n^{2}"), ("3^{n+1}", "3\\cdot 3^n"), ("4^{x}", "2^{2x}"),
        ("x^{10}", "x^10"), ("x^12^1", "x^12"), ("x^10^1", "x^10"), ("y^11^1", "y^11"), ("x^12^2", "x^24"),
        ("2^{100}", "2^{100}"), ("5^{3}", "125"), ("e^{-x}", "\\frac{1}{e^x}"), ("e^x", "\\exp(x)"),
        ("2^{n+1}", "2\\cdot2^n"), ("(-2)^3", "-8"), ("-2^2", "-4"),
    ]
    for b, e in ((2, 5), (3, 3), (5, 2), (7, 2), (2, 8), (10, 4), (6, 3)):
        pairs += [(f"{b}^{{{e}}}", f"{b}^{e}"), (f"{b}^{e}", str(b ** e)), (str(b ** e), str(b ** e)),
                  (f"{b}^{{{e + 1}}}", f"{b}^{{{e}}}"), (f"x^{{{e}}}", f"x^{e}"), (f"{b}^{{{e}}}", f"{b}^{{{e}}}")]
    return pairs


def pi():
    pairs = [
        ("\\pi/2", "\\frac{\\pi}{2}"), ("\\frac{\\pi}{2}", "\\pi/2"), ("2\\pi", "2 \\pi"), ("\\pi", "pi"),
        ("3.14", "\\pi"), ("\\frac{3\\pi}{4}", "\\frac34\\pi"), ("180^\\circ", "\\pi"),
        ("\\frac{\\pi}{3}", "60^\\circ"), ("4\\pi", "4\u03c0"), ("\u03c0", "\\pi"), ("\\pi^2", "\\pi^{2}"),
        ("2\\pi\\sqrt{3}", "2\\sqrt{3}\\pi"), ("\\frac{\\pi}{6}", "\\frac{\\pi}6"), ("\\pi r^2", "\\pi r^{2}"),
        ("\\dfrac{\\pi}{4}", "\\frac{\\pi}{4}"), ("\\tfrac{\\pi}{4}", "\\pi/4"), ("\\frac{\\pi}{4}", "\\frac{\\pi}{3}"),
        ("\\pi", "\\Pi"), ("2\\pi", "\\pi"), ("\\frac{2\\pi}{3}", "\\frac23\\pi"), ("\\pi/4", "0.25\\pi"),
        ("100\\pi", "100 \\pi"), ("100\\pi", "314"), ("\\frac{\\pi}{2}", "90^\\circ"), ("-\\pi", "- \\pi"),
        ("8\\pi \\text{ cm}^2", "8\\pi"), ("\\pi+1", "1+\\pi"), ("\\frac{1}{\\pi}", "\\pi^{-1}"),
    ]
    for k, d in ((1, 3), (2, 3), (5, 6), (1, 12), (7, 4), (3, 2), (4, 3), (1, 8)):
        num = "\\pi" if k == 1 else f"{k}\\pi"
        f = f"\\frac{{{num}}}{{{d}}}"
        pairs += [(f, f), (f"{num}/{d}", f), (f"\\dfrac{{{num}}}{{{d}}}", f), (f"\\frac{{{k}}}{{{d}}}\\pi", f),
                  (f"\\frac{{{num}}}{{{d + 1}}}", f)]
    return pairs


def units_words():
    pairs = [
        ("3\\text{ hours}", "3"), ("5 \\text{ cm}", "5"), ("12\\text{ inches}", "12"), ("5\\text{cm}", "5"),
        ("10 meters", "10"), ("\\text{10 feet}", "10"), ("4 \\mbox{ cm}^2", "4"), ("5\\text{ cm}^2", "5"),
        ("3 days", "3"), ("100\\text{ dollars}", "100"), ("\\$100", "100"), ("\\$ 100", "100"),
        ("2 million", "2000000"), ("3.5 billion", "3500000000"), ("1.2 million", "1200000"),
        ("2\\text{ million}", "2000000"), ("7 apples", "7"), ("20 \\text{ km}", "20"), ("20 km", "20"),
        ("6 seconds", "6"), ("6\\text{ seconds}", "6"), ("6 sec", "6"), ("15 minutes", "15"),
        ("2 hours and 30 minutes", "2.5"), ("12 feet", "12"), ("1 foot", "1"), ("3 yards", "3"),
        ("9 \\text{ square units}", "9"), ("9\\text{ units}^2", "9"), ("48\\text{ m}^2", "48"),
        ("48 \\text{ m}^2", "48 \\text{ m}^2"), ("5 \\text{ cm} \\text{ or } 6 \\text{ cm}", "5"),
        ("4 weeks", "4"), ("11 months", "11"), ("18 years", "18"), ("50 mph", "50"), ("3\\text{ cm}", "4"),
        ("3 hours", "4"), ("10\\,\\text{cm}", "10"), ("30\\text{ minutes}", "0.5"), ("25 \\text{cents}", "25"),
        ("\\text{5 cm}", "5"), ("\\text{five}", "5"), ("five", "5"), ("\\text{12 inches}", "1 \\text{ foot}"),
        ("1 mile", "1"), ("8 miles", "8"), ("2 centimeters", "2"), ("7\\text{ cm}^3", "7\\text{ cm}^3"),
    ]
    for n, u in ((4, "cm"), (9, "meters"), (12, "hours"), (30, "degrees"), (5, "inches"), (60, "seconds")):
        pairs += [(f"{n}\\text{{ {u}}}", str(n)), (f"{n} {u}", str(n)), (f"{n}\\text{{{u}}}", str(n)),
                  (f"{n + 1}\\text{{ {u}}}", str(n))]
    return pairs


def percent_degrees():
    pairs = [
        ("50\\%", "50"), ("50%", "50"), ("0.5", "50\\%"), ("50", "50\\%"), ("45^\\circ", "45"),
        ("45^{\\circ}", "45"), ("45 ^\\circ", "45"), ("45^ \\circ", "45"), ("45\u00b0", "45"),
        ("45 degrees", "45"), ("45\\text{ degrees}", "45"), ("90^\\circ", "\\frac{\\pi}{2}"),
        ("12.5\\%", "12.5"), ("\\frac{1}{8}", "12.5\\%"), ("30^\\circ", "30^{\\circ}"), ("60\\%", "0.6"),
        ("60\\%", "60\\%"), ("33\\frac{1}{3}\\%", "33\\frac13"), ("100\\%", "1"), ("25 \\%", "25"),
        ("25 percent", "25"), ("120^\\circ", "120^\\circ"), ("120^\\circ", "60^\\circ"), ("-30^\\circ", "-30"),
        ("360^{\\circ}", "2\\pi"), ("\\angle 45^\\circ", "45"), ("45^\\circ C", "45"), ("15.5^\\circ", "15.5"),
        ("1,000\\%", "1000"), ("\\%50", "50"), ("50\\%", "0.5"), ("90\u00b0", "90^\\circ"),
    ]
    for n in (5, 12, 36, 75, 108, 150):
        pairs += [(f"{n}\\%", str(n)), (f"{n}^\\circ", str(n)), (f"{n}^{{\\circ}}", f"{n}^\\circ"),
                  (f"{n + 5}\\%", str(n)), (f"{n}^\\circ", f"{n + 1}"), (f"{n} \\%", f"{n}\\%")]
    pairs += [("10^\\circ", "10")]
    return pairs


def intervals():
    pairs = [
        ("(0,1)", "(0, 1)"), ("[0,1)", "[0,1]"), ("(-\\infty, 2)", "(-\\infty,2)"),
        ("\\left(0, \\frac{1}{2}\\right)", "(0,\\frac12)"),
        ("(-\\infty, -1) \\cup (1, \\infty)", "(-\\infty,-1)\\cup(1,\\infty)"),
        ("[2, 5]", "[2,5]"), ("(0, 0.5)", "(0, \\frac{1}{2})"), ("(1/2, 1)", "(\\frac{1}{2}, 1)"),
        ("x \\in (0,1)", "(0,1)"), ("(0,1]", "(0,1]"), ("[-3, 3]", "[-3,3]"), ("(2/4, 1)", "(1/2, 1)"),
        ("(\\frac{2}{4}, 1)", "(\\frac{1}{2}, 1)"), ("[1, \\infty)", "[1,\\infty)"), ("[1, \\infty)", "(1,\\infty)"),
        ("(-\\infty, \\infty)", "\\mathbb{R}"), ("(-2, 3)", "(-3, 2)"), ("\\left[ 0, 1 \\right]", "[0,1]"),
        ("0 < x < 1", "(0,1)"), ("x > 2", "(2, \\infty)"), ("(1, 1000)", "(1, 1,000)"), ("(0, 2\\pi)", "(0,2\\pi)"),
        ("[0, \\pi]", "[0,\\pi]"), ("(0,\\dfrac{\\pi}{2})", "(0,\\frac{\\pi}{2})"),
        ("(1,2)\\cup(3,4)", "(1,2)\\cup (3,4)"),
        ("(1,2) \\cup (3,4)", "(1,2)\\cup(3,5)"), ("(-1, 1)", "(-1, 1)"), ("[-1,1)", "(-1,1]"),
        ("(-\\infty, 0]", "(-\\infty, 0)"), ("(3, 7]", "(3,7]"), ("(0.5, 1)", "(\\frac12, 1)"),
    ]
    for a, b in ((0, 4), (-2, 5), (1, 3), (-7, -1), (10, 20), (2, 9)):
        pairs += [(f"({a},{b})", f"({a}, {b})"), (f"[{a},{b}]", f"({a},{b})"), (f"[{a}, {b})", f"[{a},{b})"),
                  (f"\\left({a},{b}\\right]", f"({a},{b}]"), (f"({a},{b + 1})", f"({a},{b})"),
                  (f"({a}, \\frac{{{b}}}{{2}})", f"({a},{b}/2)")]
    # Element-wise equal fractions: only the brackets tell these apart.
    pairs += [("[1, 2)", "(1, 2)"), ("[1/2, 3/4)", "(1/2, 3/4)"), ("(1/2,3/4]", "(1/2,3/4)"),
              ("(1/2, 3/4)", "(1/2,3/4)")]
    return pairs


def tuples_sets():
    pairs = [
        ("(1,2)", "(1, 2)"), ("(2,1)", "(1,2)"), ("\\{1,2\\}", "{1,2}"), ("\\{1, 2\\}", "\\{1,2\\}"),
        ("1, 2", "1,2"), ("2, 1", "1, 2"), ("(1, \\frac{1}{2})", "(1, 0.5)"), ("(1, 0.5)", "(1, \\frac12)"),
        ("(3, -4)", "(3,-4)"), ("\\{1, 2, 3\\}", "\\{3, 2, 1\\}"), ("1 and 2", "1, 2"), ("1 or 2", "1,2"),
        ("1 \\text{ and } 2", "1, 2"), ("x=1, y=2", "(1,2)"), ("(1,2,3)", "(1,2)"), ("[1,2]", "(1,2)"),
        ("(1,000, 2)", "(1000,2)"), ("(1, 2)", "(1,3)"), ("-1, 3", "3, -1"), ("\\left(1, 2\\right)", "(1,2)"),
        ("(\\frac{1}{2}, \\frac{3}{4})", "(\\frac12,\\frac34)"), ("(\\frac{2}{4}, 1)", "(\\frac{1}{2}, 1)"),
        ("(2/4, 1)", "(1/2, 1)"), ("(0.5, 1)", "(1/2, 1)"), ("(1, 2)", "1, 2"), ("\\{2\\}", "2"),
        ("2, 3, 5, 7", "2,3,5,7"), ("2,3,5,7", "2, 3, 5"), ("(a, b)", "(a,b)"), ("(x, y, z)", "(x,y,z)"),
        ("(1, -1), (2, 3)", "(1,-1),(2,3)"), ("\\{-2, 2\\}", "\\pm 2"), ("\\pm 2", "-2, 2"), ("1; 2", "1, 2"),
        ("(1,2)", "\\langle 1,2\\rangle"),
        ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}"),
    ]
    for a, b in ((1, 4), (-3, 2), (5, 0), (12, 7), (2, -9), (6, 6)):
        swapped = (f"({b},{a})", f"({a},{b})") if a != b else (f"({a},{b})", f"({a},{b},{a})")
        pairs += [(f"({a},{b})", f"({a}, {b})"), swapped, (f"\\{{{a}, {b}\\}}", f"\\{{{a},{b}\\}}"),
                  (f"{a}, {b}", f"({a},{b})"), (f"({a}, {b}.0)", f"({a},{b})"),
                  (f"({a}, \\dfrac{{{b}}}{{1}})", f"({a},{b})")]
    pairs += [("(1, \\frac{1}{2})", "(1,1/2)")]
    return pairs


def text_choice():
    pairs = [
        ("A", "A"), ("(A)", "A"), ("\\text{(A)}", "A"), ("a", "A"), ("\\textbf{(A)}", "A"), ("B", "A"),
        ("\\text{Yes}", "Yes"), ("yes", "Yes"), ("No", "no"), ("\\text{even}", "even"), ("Even", "even"),
        ("\\text{odd}", "even"), ("Monday", "monday"), ("\\text{Tuesday}", "Tuesday"), ("(C)", "C"), ("C", "(C)"),
        ("\\mathrm{(D)}", "D"), ("\\text{E}", "E"), ("True", "true"), ("\\text{True}", "False"),
        ("\\textbf{(B) } 5", "B"), ("B) 5", "B"), ("\\text{(B)}\\ 5", "\\text{(B)}"), ("Option A", "A"),
        ("\\text{ A }", "A"), ("A, C", "A,C"), ("A and C", "A, C"), ("C, A", "A, C"), ("\\text{Alice}", "Alice"),
        ("Bob", "Alice"), ("\\text{no solution}", "\\text{No solution}"), ("none", "\\text{none}"),
        ("\\emptyset", "\\varnothing"), ("\\text{infinitely many}", "infinitely many"), ("\\text{North}", "N"),
        ("\\text{square}", "square"), ("\\text{a square}", "square"), ("\\text{Tuesday }", "Tuesday"),
        ("\\text{\\textbf{A}}", "A"), ("\\textit{A}", "A"), ("\\text{yes}", "\\text{no}"),
    ]
    for c in "ABCDE":
        pairs += [(c, c), (c.lower(), c), (f"({c})", c), (f"\\text{{({c})}}", f"({c})"),
                  (chr(ord(c) + 1), c), (f"\\textbf{{{c}}}", c)]
    return pairs


def equations():
    pairs = [
        ("x=5", "5"), ("x = 5", "5"), ("5", "x=5"), ("y=2x+1", "2x+1"), ("y = 2x + 1", "y=2x+1"),
        ("x^2+y^2=1", "x^2+y^2=1"), ("x^2+y^2=1", "x^2 + y^2 = 1"), ("k=3", "3"), ("abc=5", "5"),
        ("ab=5", "5"), ("x=2 or x=3", "2,3"), ("x=2 \\text{ or } x=3", "2, 3"), ("x = -1", "-1"),
        ("f(x)=x^2", "x^2"), ("2x+1", "1+2x"), ("x=\\frac{1}{2}", "\\frac12"), ("n = 10", "10"),
        ("x \\ge 2", "x\\geq 2"), ("x\\geq 2", "x \\geq 2"), ("a=1,b=2", "(1,2)"), ("y=-x+3", "y=3-x"),
        ("2x-y=3", "2x - y = 3"), ("y=mx+b", "y = mx + b"), ("x=1", "x=2"), ("x=-3", "3"),
        ("a = 4", "a=4"), ("N=120", "120"), ("P(A)=0.3", "0.3"), ("m\\angle A = 30", "30"),
        ("x_1=2", "2"), ("x=2,y=3", "x=2, y=3"), ("x+y=5", "y+x=5"), ("(x-1)^2+(y+2)^2=9", "(x-1)^2+(y+2)^2=9"),
        ("x = 1 \\text{ and } x = 2", "1, 2"), ("y=\\frac{1}{2}x", "y=\\frac12x"), ("y=x/2", "y=\\frac{x}{2}"),
        ("3x=6", "x=2"), ("x = \\pm 2", "\\pm 2"), ("t = 4 s", "4"),
    ]
    for v, val in (("x", "7"), ("y", "-2"), ("n", "12"), ("t", "\\frac{3}{2}"), ("k", "0.5"), ("r", "\\sqrt{5}")):
        pairs += [(f"{v}={val}", val), (f"{v} = {val}", val), (f"{v}={val}", f"{v}={val}"),
                  (f"{v}{v}={val}", val), (f"{v}={val}", f"{v}=1{val}")]
    return pairs


def mixed_numbers():
    pairs = [
        ("2\\frac{1}{2}", "\\frac{5}{2}"), ("2 1/2", "5/2"), ("2\\frac12", "2 \\frac{1}{2}"),
        ("2 \\frac{1}{2}", "2.5"), ("-2\\frac{1}{2}", "-\\frac{5}{2}"), ("3\\tfrac{1}{4}", "3\\frac14"),
        ("1 3/4", "1\\frac{3}{4}"), ("7 3/4", "7+3/4"), ("2\\dfrac{1}{3}", "\\frac{7}{3}"),
        ("2\\frac{1}{2}", "2\\frac{1}{2}"), ("2 1/2", "2 1/2"), ("2\\,\\frac{1}{2}", "2\\frac{1}{2}"),
        ("2+\\frac{1}{2}", "2\\frac{1}{2}"), ("2\\frac{1}{2}", "1\\frac{1}{2}"), ("2\\frac{1}{2}", "2\\frac{1}{3}"),
        ("5\\frac{3}{8}", "5 3/8"), ("5 3/8", "43/8"), ("10\\frac{1}{10}", "10.1"), ("1\\frac{1}{2}", "3/2"),
        ("-1 1/2", "-1.5"), ("- 1 1/2", "-1 1/2"), ("2 \\tfrac12", "2\\frac12"), ("12\\frac{1}{2}", "\\frac{25}{2}"),
    ]
    for w, a, b in ((2, 1, 2), (3, 1, 4), (1, 3, 4), (5, 2, 3), (7, 3, 4), (4, 5, 6), (9, 1, 3)):
        imp = w * b + a
        pairs += [(f"{w}\\frac{{{a}}}{{{b}}}", f"\\frac{{{imp}}}{{{b}}}"), (f"{w} {a}/{b}", f"{imp}/{b}"),
                  (f"{w}\\frac{{{a}}}{{{b}}}", f"{w} {a}/{b}"), (f"{w}\\frac{a}{b}", f"{w}\\frac{{{a}}}{{{b}}}"),
                  (f"{w} \\frac{{{a}}}{{{b}}}", f"{w}+\\frac{{{a}}}{{{b}}}"),
                  (f"{w + 1}\\frac{{{a}}}{{{b}}}", f"{w} {a}/{b}"),
                  (f"{w} {a}/{b}", f"{w}\\frac{{{a}}}{{{b}}}")]
    return pairs


NAMED = [
    ("-\\frac{1}{2}", "-1/2"), ("\\sqrt{2}", "\\sqrt 2"), ("2\\sqrt{2}", "2\\sqrt2"), ("e^{2}", "e^2"),
    ("2^{n}-1", "2^n-1"), ("\\pi/2", "\\frac{\\pi}{2}"), ("\\frac{a}{b}", "a/b"), ("\\{1,2\\}", "{1,2}"),
    ("3\\text{ hours}", "3"), ("+5", "5"), ("\\displaystyle 5", "5"), ("\\boxed{42}", "42"),
]


def extraction():
    """Whole responses (not wrapped in a template): brace and box edge cases."""
    rows = [
        ("We need $\\frac{a}{b}$ with $\\{a, b\\}$ coprime, so \\boxed{\\frac{3}{4}}.", "\\frac{3}{4}"),
        ("Nested: $\\boxed{\\frac{\\sqrt{2}}{2}}$", "\\frac{\\sqrt2}{2}"),
        ("Nested: $\\boxed{\\left\\{ 1, 2 \\right\\}}$", "\\{1,2\\}"),
        ("The set {1, 2}} is odd. Anyway \\boxed{5}.", "5"),
        ("Answer: \\boxed{5}. Also note x}.", "5"),
        ("An open { brace never closes, and the answer is \\boxed{5}.", "5"),
        ("Unclosed box: \\boxed{5", "5"),
        ("Unclosed box after a good one: \\boxed{4} then \\boxed{5", "4"),
        ("\\boxed 5", "5"), ("So the answer is \\boxed 7.", "7"), ("So the answer is \\boxed  x.", "x"),
        ("\\boxed 12 and later \\boxed 13", "12"), ("\\boxed 12 and later \\boxed 13", "13"),
        ("\\boxed{3} but earlier \\boxed 4", "3"), ("\\boxed -5", "-5"), ("\\boxed\n42", "42"),
        ("\\boxed 2\\frac{1}{2}", "2\\frac{1}{2}"), ("\\boxed 2\\frac{1}{2}", "2"), ("\\boxed{}", "5"),
        ("\\boxed{}", ""), ("\\boxed{ }", "5"), ("First \\boxed{3}, then \\boxed{4}.", "4"),
        ("First \\boxed{3}, then \\boxed{4}.", "3"), ("\\boxed{1} \\boxed{2} \\boxed{3}", "3"),
        ("\\boxed{A} or \\boxed{B}", "B"), ("\\fbox{5}", "5"), ("\\framebox{5}", "5"),
        ("The answer is 5.", "5"), ("The answer is $5$.", "5"), ("boxed{5}", "5"), ("\\boxed {5}", "5"),
        ("\\boxed{5} and \\boxed {6}", "6"), ("\\boxed{5} and \\boxed {6}", "5"), ("\\Boxed{5}", "5"),
        ("$\\boxed{\\text{(B)}}$", "B"), ("\\boxed{\\boxed{42}}", "42"), ("\\boxed{\\fbox{7}}", "7"),
        ("\\boxed{{7}}", "7"), ("\\boxed{\\{1,2\\}}", "\\{1,2\\}"), ("\\boxed{a}{b}", "a"),
        ("\\boxed{\\frac{1}{2}}}", "\\frac{1}{2}"), ("}\\boxed{1}", "1"),
        ("Thus $\\boxed{x=2}$ and $x^{2}=4$.", "2"), ("\\boxed{2}\\n\\nWait, recheck: \\boxed{3}", "2"),
        ("\\boxed{2}\n\nWait, let me recheck.\n\nActually \\boxed{3}", "3"),
        ("\\(\\boxed{10}\\)", "10"), ("\\[ \\boxed{ 10 } \\]", "10"), ("**\\boxed{10}**", "10"),
        ("\\boxed{10}<|im_end|>", "10"), ("</think>\\boxed{10}", "10"), ("\\boxed{10\\text{ cm}}", "10"),
        ("\\mathbf{\\boxed{9}}", "9"), ("\\boxed{\\mathbf{9}}", "9"), ("\\boxed{9} \\boxed{}", "9"),
        ("\\boxed{9} \\boxed{}", ""), ("\\\\boxed{9}", "9"), ("\\boxed\\frac{1}{2}", "\\frac{1}{2}"),
        ("\\boxed{-\\frac{1}{2}}", "-\\frac12"), ("\\boxed{(1,2)}", "(1, 2)"), ("\\boxed{[0,1)}", "[0,1)"),
        ("$$\\boxed{\\dfrac{7}{2}}$$", "\\frac{7}{2}"), ("\\boxed{\\dfrac{7}{2}}", "3.5"),
        ("\\boxed{}5", "5"), ("\\boxed{ \\text{even} }", "even"), ("\\boxed{%}", "%"),
        ("\\boxed{2,}", "2"), ("f(x)=\\begin{cases}1\\\\2\\end{cases} so \\boxed{2}", "2"),
        ("\\boxed{\\sqrt{3}}.} extra", "\\sqrt{3}"),
        ("first \\boxed{3}, finally \\boxed{\\frac{1}{2}}", "\\frac12"), ("a stray } here, then \\boxed{42}", "42"),
        ("the answer is 42", "42"), ("\\boxed 42 or \\boxed 7", "42"),
    ]
    return rows


# fmt: on
CATEGORIES = [
    ("integers_signs", integers_signs),
    ("decimals", decimals),
    ("fractions", fractions),
    ("roots", roots),
    ("powers", powers),
    ("pi", pi),
    ("units_words", units_words),
    ("percent_degrees", percent_degrees),
    ("intervals", intervals),
    ("tuples_sets", tuples_sets),
    ("text_choice", text_choice),
    ("equations", equations),
    ("mixed_numbers", mixed_numbers),
]


def build() -> list[dict]:
    rows = []
    for cat, make in CATEGORIES:
        seen = set()
        for answer, truth in make():
            if (answer, truth) in seen:
                continue
            seen.add((answer, truth))
            rows.append(
                {
                    "id": f"{cat}-{len(seen):03d}",
                    "category": cat,
                    "response": wrap(answer, len(seen)),
                    "ground_truth": truth,
                }
            )
    for i, (response, truth) in enumerate(extraction(), 1):
        rows.append(
            {"id": f"extraction-{i:03d}", "category": "extraction", "response": response, "ground_truth": truth}
        )
    for i, (answer, truth) in enumerate(NAMED, 1):
        rows.append(
            {
                "id": f"named-{i:02d}",
                "category": "named",
                "response": f"Putting it together, the answer is $\\boxed{{{answer}}}$.",
                "ground_truth": truth,
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    rows = build()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["category"]] = counts.get(row["category"], 0) + 1
    print(f"wrote {len(rows)} pairs to {args.out}")
    for cat, n in counts.items():
        print(f"  {cat:16s} {n}")


if __name__ == "__main__":
    main()
