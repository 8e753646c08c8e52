"""The README and the top-level documentation pages stay short, reachable and true to the code and the tables.

Checked here: the README's length and the order of its first sections; no reference a reader cannot follow (files
outside the repository, spec sections, issue numbers, batch numbers) in the README or a top-level docs page; every
relative link and anchor resolves; the keys table names keys of the composed config with their defaults; the dry run
example of the reliability page is what the smoke script prints; the regime ledger cites committed tables and takes
its numbers from them.
"""

import glob
import json
import os
import re

import pytest
from omegaconf import OmegaConf
from support import ROOT, validate_script, write_parquet_rows

from recipe.pc.testing import compose_pc_config

README = os.path.join(ROOT, "README.md")
REGIMES = os.path.join(ROOT, "docs", "results", "regimes")
REGIME_README = os.path.join(REGIMES, "README.md")


def top_level_pages() -> list[str]:
    """README.md, docs/*.md and the README of each results study (not the notebooks or the logs)."""
    docs = os.path.join(ROOT, "docs")
    pages = [README]
    pages += sorted(os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))
    pages += [
        os.path.join(docs, "results", "README.md"),
        REGIME_README,
        os.path.join(docs, "gpu-checks", "README.md"),
    ]
    return pages


PAGES = top_level_pages()


def page_id(path: str) -> str:
    return os.path.relpath(path, ROOT)


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def prose(text: str) -> str:
    """The text without fenced code blocks (their '#' starts shell comments)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line number from 1, level, title) of every Markdown heading outside code blocks."""
    found, in_code = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (m := re.match(r"(#{1,6}) (.+)", line)):
            found.append((number, len(m.group(1)), m.group(2).strip()))
    return found


def section(text: str, title: str) -> str:
    """The body of the '## ' section whose title starts with ``title``, up to the next heading of level 2 or 1."""
    lines = text.splitlines()
    for number, level, name in headings(text):
        if level == 2 and name.lower().startswith(title.lower()):
            end = next((n for n, lv, _ in headings(text) if n > number and lv <= 2), len(lines) + 1)
            return "\n".join(lines[number : end - 1])
    raise AssertionError(f"no section {title!r}")


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the first Markdown table in ``text``, as stripped cells."""
    rows, started = [], False
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if started and not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append(cells)
            started = True
        elif started:
            break
    return rows[1:] if rows and all(re.fullmatch(r":?-+:?", c) for c in rows[0]) else rows


def slug(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    title = re.sub(r"[`*_]", "", title.lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title))


def links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", prose(text))


# ---------------------------------------------------------------------- the README's shape
def test_readme_is_at_most_250_lines():
    assert len(read(README).splitlines()) <= 250


def test_install_quick_start_and_validate_come_within_the_first_100_lines():
    found = {name.lower(): number for number, level, name in headings(read(README)) if level == 2}
    for wanted in ("install", "quick start", "validate"):
        numbers = [n for name, n in found.items() if name.startswith(wanted)]
        assert numbers and min(numbers) <= 100, f"no '## {wanted}...' heading in the README's first 100 lines"


def test_the_ci_test_command_sits_in_the_install_section():
    text = read(README)
    assert text.count("<!-- ci:test-command -->") == 1
    install = section(text, "Install and test")
    after = install.split("<!-- ci:test-command -->", 1)[1].lstrip("\n")
    assert after.startswith("```bash\n"), "the marker must be followed at once by a fenced bash block"
    command = after.split("\n", 2)[1]
    assert "pytest" in command


def test_readme_says_plainly_that_no_paper_configuration_has_run():
    rows = [" | ".join(row) for row in table_rows(section(read(README), "Status"))]
    names = ("Qwen2.5-Math-1.5B", "Qwen3-4B", "DeepMath", "Polaris")
    paper = [row for row in rows if all(name in row for name in names)]
    assert len(paper) == 1, "one status row names the paper's configurations"
    assert re.search(r"never run", paper[0], re.I), paper[0]


# ---------------------------------------------------------------------- what a reader cannot follow
UNREACHABLE = {
    "a path outside the repository (shared/)": re.compile(r"\bshared/"),
    "a spec section": re.compile(r"spec\s*§", re.I),
    "an issue number": re.compile(r"(?:^|[\s(\[])#\d+\b", re.M),
    "a batch number": re.compile(r"\bbatch(?:es)?\s+\d+", re.I),
}


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_pages_name_nothing_a_reader_cannot_follow(page):
    text = read(page)
    for what, pattern in UNREACHABLE.items():
        hits = [m.group(0).strip() for m in pattern.finditer(text)]
        assert not hits, f"{page_id(page)} has {what}: {hits[:5]}"


def test_code_and_scripts_name_no_document_outside_the_repository():
    # Docstrings and --help texts are read by users too; the two patterns a source file could match by accident
    # (issue-like and batch numbers) are left to the pages above.
    patterns = [UNREACHABLE[key] for key in ("a path outside the repository (shared/)", "a spec section")]
    hits = []
    for folder in ("recipe", "data", "train_scripts", "scripts"):
        for path in glob.glob(os.path.join(ROOT, folder, "**", "*.*"), recursive=True):
            if path.endswith((".py", ".sh", ".yaml")):
                text = read(path)
                hits += [f"{os.path.relpath(path, ROOT)}: {m.group(0)}" for p in patterns for m in p.finditer(text)]
    assert not hits, hits


def test_gpu_checks_page_says_nothing_of_how_files_reached_the_host():
    text = read(os.path.join(ROOT, "docs", "gpu-checks", "README.md"))
    for word in ("pieces", "bundle", "64 MiB", "30 s between", "docs/gpu-checks/launch.sh"):
        assert word not in text, word


# ---------------------------------------------------------------------- links
@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_resolves(page):
    text = read(page)
    folder = os.path.dirname(page)
    for target in links(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = os.path.normpath(os.path.join(folder, path)) if path else page
        assert os.path.exists(file), f"{page_id(page)} links {target}, which does not exist"
        if anchor and file.endswith(".md"):
            anchors = {slug(name) for _, _, name in headings(read(file))}
            assert anchor in anchors, f"{page_id(page)} links {target}: no heading with that anchor"


# A repository path in backticks, e.g. `tests/fit/test_parallel_rows.py` or `recipe/pc/config/pc_trainer.yaml`.
REPO_PATH = re.compile(r"`((?:recipe|scripts|train_scripts|data|tests|docs)/[\w./-]+\.(?:py|sh|yaml|md|txt))`")


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_repository_file_a_page_names_exists(page):
    # Pages name files from the repository root; a move (say, of tests into folders) must update them.
    missing = [p for p in REPO_PATH.findall(read(page)) if not os.path.exists(os.path.join(ROOT, p))]
    assert not missing, f"{page_id(page)} names files that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_test_a_page_names_is_defined(page):
    names = set(re.findall(r"`(test_\w+)`", read(page)))
    defined = set()
    for folder, _, files in os.walk(os.path.join(ROOT, "tests")):
        for name in files:
            if name.endswith(".py"):
                defined |= set(re.findall(r"^def (test_\w+)", read(os.path.join(folder, name)), flags=re.M))
    assert names <= defined, f"{page_id(page)} names tests that do not exist: {sorted(names - defined)}"


def test_the_names_the_architecture_page_tells_authors_to_import_are_importable():
    """An allocator or prompt filter written from docs/architecture.md keeps working: every name its examples and its
    text import is there, and a renamed one keeps its old name (the group verdict was the pilot's)."""
    import ast
    import importlib

    text = read(os.path.join(ROOT, "docs", "architecture.md"))
    imports = [
        node
        for block in re.findall(r"```python\n(.*?)```", text, re.S)
        for node in ast.walk(ast.parse(block))
        if isinstance(node, ast.ImportFrom) and node.module.startswith("recipe.")
    ]
    named = {(node.module, alias.name) for node in imports for alias in node.names}
    named |= {("recipe.pc.settings", "PCConfigError"), ("recipe.pc.allocation", "PilotVerdict")}
    assert len(named) > 10
    missing = [
        f"{module}.{name}" for module, name in sorted(named) if not hasattr(importlib.import_module(module), name)
    ]
    assert missing == []


def first_cell_names(text: str, after: str) -> set[str]:
    """The names in backticks in the first column of the first table after ``after``."""
    return {name for row in table_rows(text[text.index(after) :]) for name in re.findall(r"`(\w+)", row[0])}


@pytest.mark.parametrize("kind", ["allocator", "prompt filter"])
def test_the_architecture_page_lists_every_hook_and_class_variable_an_author_may_set(kind):
    """Its tables name every public method and class variable of the base class, and nothing else."""
    from recipe.pc.allocators.base import Allocator
    from recipe.pc.stages.prompt_filter import PromptFilter

    text = read(os.path.join(ROOT, "docs", "architecture.md"))
    if kind == "allocator":
        base = Allocator
        listed = first_cell_names(text, "An `Allocator` subclass implements") | first_cell_names(
            text, "Everything else has a default"
        )
    else:
        base = PromptFilter
        listed = first_cell_names(text, "Every other method of `PromptFilter`")
    assert listed == {name for name in vars(base) if not name.startswith("_")}


# ---------------------------------------------------------------------- the keys people change most
def key_rows() -> list[list[str]]:
    return table_rows(section(read(README), "The keys people change most"))


def test_the_keys_table_has_eleven_keys_of_the_composed_config_with_their_defaults():
    rows = key_rows()
    assert len(rows) == 11
    cfg = compose_pc_config([])
    absent = object()
    for row in rows:
        key, default = (cell.strip("`") for cell in row[:2])
        assert OmegaConf.select(cfg, key, default=absent) is not absent, f"{key} is not in the composed config"
        parent, _, leaf = key.rpartition(".")
        raw = OmegaConf.to_container(OmegaConf.select(cfg, parent), resolve=False)[leaf]
        shown = "null" if raw is None else str(raw).lower() if isinstance(raw, bool) else str(raw)
        assert shown == default, f"{key}: the README says {default}, the config has {shown}"


# ---------------------------------------------------------------------- the regime ledger
def ledger_rows() -> list[list[str]]:
    return table_rows(section(read(REGIME_README), "Ledger"))


def cited_tables(row: list[str]) -> list[str]:
    return [os.path.normpath(os.path.join(REGIMES, target)) for target in re.findall(r"\]\(([^)]+)\)", row[-1])]


def test_the_regime_readme_opens_with_the_ledger_and_at_most_five_one_sentence_conclusions():
    text = read(REGIME_README)
    level2 = [name for _, level, name in headings(text) if level == 2]
    assert level2[:2] == ["Ledger", "Conclusions"]
    items = re.findall(r"^\d+\. (.+)$", section(text, "Conclusions"), flags=re.M)
    assert 1 <= len(items) <= 5
    for item in items:
        assert not re.search(r"[.;!?]\s+[A-Z]", item), f"more than one sentence: {item}"
    assert "(notebook.md)" in text


def test_every_ledger_row_cites_committed_tables_that_exist():
    rows = ledger_rows()
    assert rows
    for row in rows:
        tables = cited_tables(row)
        assert tables, f"no table cited: {row[:2]}"
        for table in tables:
            assert table.startswith(REGIMES + os.sep) and table.endswith(".md"), table
            assert os.path.isfile(table), f"{row[:2]} cites {table}, which does not exist"


def numbers(cell: str) -> list[str]:
    """The numbers of a cell as the tables write them ('−' as '-'), leaving out ratios ('1.33×')."""
    cell = cell.replace("−", "-")
    return [m.group(0) for m in re.finditer(r"-?\d[\d,]*(?:\.\d+)?(?![\d×])", cell) if len(m.group(0).strip("-")) > 1]


def test_the_ledger_takes_its_numbers_from_the_tables_it_cites():
    for row in ledger_rows():
        text = "".join(read(table) for table in cited_tables(row))
        for cell in row[2:5]:  # rollouts to target, mean-curve crossings, accuracy at equal rollouts
            for number in numbers(cell):
                assert number in text, f"{row[1]}: {number} is in none of the tables the row cites"


def test_the_pre_registered_rows_come_first_and_read_as_their_records_do():
    first, second = ledger_rows()[:2]
    assert "pre-registered" in first[1] and "prereg_pc4x60/intervals.md" in first[-1]
    record = read(os.path.join(REGIMES, "prereg-pc4x60.md")).split("## Record", 1)[1]
    assert "no measured difference" in record
    for number in ("−0.019", "[−0.038, −0.002]", "0.087"):
        assert number in first[4] and number in record, number
    assert "2 of 3 finished, 2 stopped" in first[2]
    # The mean curves' crossing and the ratio's interval as its intervals table reads them.
    intervals = read(os.path.join(REGIMES, "prereg_pc4x60", "intervals.md"))
    ratio = next(r for r in table_rows(intervals) if r[1] == "rollouts to target")
    assert first[3].startswith(f"{ratio[2]} / {ratio[3]}") and ratio[5] in first[3], (first[3], ratio)
    # The second is read only once its runs have finished; until then its row says so, as its record does.
    assert "pre-registered" in second[1] and "prereg-pc4x60-equal-budgets.md" in second[-1]
    # The finished runs are those in the pre-registration's LOGS folder that logged their configured last step.
    logs, finished = os.path.join(REGIMES, "prereg2-runs"), 0
    for run in os.listdir(logs) if os.path.isdir(logs) else []:
        steps = [json.loads(line)["data"] for line in open(os.path.join(logs, run, "metrics.jsonl"))]
        finished += steps[-1]["training/global_step"] == steps[-1]["training/total_training_steps"]
    assert f"{finished} of 26 runs finished" in second[2], "the ledger's count of finished runs is not the logs'"
    # Once the exact command has written its tables, the row quotes them at B* (marked interim until 13 a side).
    intervals = os.path.join(REGIMES, "prereg_pc4x60_equal_budgets", "intervals.md")
    if finished >= 4:
        rows = table_rows(read(intervals))
        at_b = next(r for r in rows if r[1] == "acc. at 27,648 rollouts")
        for number in (at_b[4], at_b[5]):
            assert number.replace("-", "\u2212") in second[4], (number, second[4])
        to_peak = next(r for r in rows if r[1].startswith("rollouts to") and "peak of" in r[1])
        assert to_peak[5] in second[3], (to_peak, second[3])
        assert ("interim" in second[2]) == (finished < 26), second[2]


def test_plan_s_measured_ratios_are_the_ledger_s():
    """``plan`` warns against a PC split by the ratio the study measured for it: the same numbers as the ledger's."""
    from recipe.pc_tools.predictions import MEASURED_AGAINST_GRPO

    ledger = set()
    for row in ledger_rows():
        mix_and_group, config, crossings = row[0].split(", "), row[1], row[3]
        split = re.match(r"PC (\d+) \+ (\d+)", config)
        ratio = re.search(r"\((\d\.\d\d)×\)", crossings)
        if split and ratio and len(mix_and_group) == 2:  # not the subset-of-prompts rows
            screen = re.search(r"screened by (\d+)", config)
            key = (int(split[1]), int(split[2]), int(screen[1]) if screen else None, mix_and_group[0])
            ledger.add((*key, float(ratio[1])))
    assert len(ledger) >= 8
    assert set(MEASURED_AGAINST_GRPO) == ledger


def test_the_dry_run_example_of_the_reliability_page_is_what_the_smoke_script_prints(tmp_path):
    """docs/reliability.md shows the smoke script's dry run: its data (160 train rows), its hub model, its folder."""
    text = read(os.path.join(ROOT, "docs", "reliability.md"))
    shown = re.search(r"### What the dry run says\n.*?```\n(.*?)```", text, flags=re.S).group(1)
    for name, rows in (("train.parquet", 160), ("test.parquet", 32)):
        write_parquet_rows(tmp_path / "data" / name, rows)
    out_dir = tmp_path / "outputs" / "smoke_1gpu"
    printed = validate_script("smoke_1gpu.sh", tmp_path, DATA_DIR=str(tmp_path / "data"), OUT_DIR=str(out_dir))
    assert printed.code == 0, printed.err[-2000:]
    assert printed.out.replace(str(tmp_path), "<repo>") == shown
