"""The import graph of recipe/: no module imports itself through others (a circle makes import order matter and
hides what depends on what), and the training plugin (recipe.pc) never imports the offline tools (recipe.pc_tools),
which import it. The test kit (recipe.pc.testing) drives both, for an author's tests: nothing of the plugin imports it,
so a training run never loads the tools through it.

Every import statement counts, those inside functions and under ``if TYPE_CHECKING:`` too: a circle that only type
checkers see still says that two modules depend on each other, and a deferred import that closes one still runs.
``from package import name`` is an import of the module ``package.name`` where that is one, else of the package.
"""

import ast
import os

from support import ROOT

KIT = "recipe.pc.testing"


def modules() -> dict[str, str]:
    """Dotted name -> path of every module under recipe/ (a package by its own name)."""
    found = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "recipe")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, ROOT)[: -len(".py")].replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    return found


def all_imports(tree: ast.AST):
    """Every Import and ImportFrom node of ``tree``."""
    return (node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom))


def import_graph(known: dict[str, str]) -> dict[str, set[str]]:
    graph = {}
    for module, path in known.items():
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        targets = set()
        for node in all_imports(ast.parse(open(path, encoding="utf-8").read(), filename=path)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
            for name in names:
                while name and name not in known:  # an attribute of a module: the module
                    name = name.rpartition(".")[0]
                if name and name != module:
                    targets.add(name)
        graph[module] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_module_of_recipe_imports_itself_through_others():
    assert circles(import_graph(modules())) == []


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_plugin_never_imports_the_tools_nor_the_test_kit():
    arrows = {
        module: sorted(t for t in targets if in_package(t, "recipe.pc_tools") or in_package(t, KIT))
        for module, targets in import_graph(modules()).items()
        if in_package(module, "recipe.pc") and not in_package(module, KIT)
    }
    assert {module: targets for module, targets in arrows.items() if targets} == {}


def test_the_check_finds_a_circle_wherever_its_imports_sit(tmp_path):
    known = {}
    for name, text in {
        "a": "from recipe import b\n",
        "b": "def f():\n    from recipe.c import x\n",  # a deferred import still counts
        "c": "import recipe.a\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from recipe import d\n",
        "d": "from recipe.c import y\n",
    }.items():
        (tmp_path / f"{name}.py").write_text(text)
        known[f"recipe.{name}"] = str(tmp_path / f"{name}.py")
    assert circles(import_graph(known)) == [["recipe.a", "recipe.b", "recipe.c", "recipe.d"]]
