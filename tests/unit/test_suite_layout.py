"""The test suite's own layout: test modules live in the four layer folders, their names are unique (pytest imports
them by base name), and none imports another or conftest; shared helpers belong in tests/support.py, the stand-ins
for verl and the trainer runs on them in the test kit, recipe.pc.testing."""

import ast
import glob
import os
from collections import Counter

from support import ROOT, TESTS

LAYERS = ("unit", "fit", "scripts", "docs")


def suite_modules() -> list[str]:
    return sorted(glob.glob(os.path.join(TESTS, "**", "test_*.py"), recursive=True))


def imported_modules(path: str) -> set[str]:
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_test_module_imports_another():
    offenders = {
        os.path.relpath(path, TESTS): sorted(name for name in imported_modules(path) if name.startswith("test_"))
        for path in suite_modules()
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_nothing_but_pytest_imports_conftest():
    # conftest is pytest's, not a module: the benchmarks import the test helpers from support too.
    paths = glob.glob(os.path.join(TESTS, "**", "*.py"), recursive=True)
    paths += glob.glob(os.path.join(ROOT, "benchmarks", "*.py"))
    assert [os.path.relpath(p, ROOT) for p in paths if "conftest" in imported_modules(p)] == []


def test_every_test_module_is_in_a_layer_folder_under_a_unique_name():
    paths = [os.path.relpath(path, TESTS) for path in suite_modules()]
    assert paths and all(path.split(os.sep)[0] in LAYERS and path.count(os.sep) == 1 for path in paths), paths
    names = Counter(os.path.basename(path) for path in paths)
    assert [name for name, count in names.items() if count > 1] == []


def test_the_check_sees_an_import_of_a_test_module(tmp_path):
    module = tmp_path / "test_example.py"
    module.write_text("import os\nfrom test_other import helper\nimport test_third as t\nfrom support import ROOT\n")
    assert imported_modules(str(module)) == {"os", "test_other", "test_third", "support"}
