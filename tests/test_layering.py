"""The house keeps its shape: imports only go down the layers, no private name crosses a package, the CLI
defines each option once, and no top-level def is referenced by nothing. Pure AST and text, no TVM."""
from __future__ import annotations

import ast
import collections
import re
from pathlib import Path

from .cli_helpers import ROOT

PACKAGES = ("recommender", "featurize", "training")
# lowest first: a module may import its own layer and those below it, never one above
LAYERS = ("recommender.core", "featurize", "recommender.target", "recommender.measure", "recommender.frontend",
          "recommender.rules", "recommender.bank", "training", "recommender.transfer", "recommender.compare",
          "recommender.cli")


def layer(module: str) -> int | None:
    """The index in LAYERS of the layer `module` belongs to (None: the `recommender` package itself)."""
    return next((i for i, prefix in enumerate(LAYERS) if module == prefix or module.startswith(prefix + ".")), None)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path = ROOT) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, names) of every import of our packages in the file, function-local ones too."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    package = parts if parts[-1] == "__init__" else parts[:-1]
    package = package[:-1] if parts[-1] == "__init__" else package
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] in PACKAGES:
                out.append((node.lineno, module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] in PACKAGES]
    return out


def sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def upward_imports(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted(p for folder in PACKAGES for p in (root / folder).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        mine = layer(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        for line, module, names in imports(path, root):
            # `from recommender import x` names a subpackage or module: judge by what it names
            targets = [f"{module}.{n}" for n in names] if module == "recommender" else [module]
            for target in targets:
                theirs = layer(target)
                if mine is not None and theirs is not None and theirs > mine:
                    found.append(f"{path.relative_to(root)}:{line} ({LAYERS[mine]}) imports {target} ({LAYERS[theirs]})")
    return found


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports() == []


def test_the_layering_check_sees_an_upward_import(tmp_path):
    """A core module that imports the CLI, and a featurize module that imports training, are both reported."""
    for name in PACKAGES:
        (tmp_path / name).mkdir()
    (tmp_path / "recommender" / "core").mkdir()
    (tmp_path / "recommender" / "core" / "rows.py").write_text("def f():\n    from ..cli import main\n")
    (tmp_path / "featurize" / "tokens.py").write_text("from training.registry import RANKERS\n")
    (tmp_path / "training" / "fit.py").write_text("from featurize.tokens import x\nfrom recommender.core import rows\n")
    assert upward_imports(tmp_path) == [
        "featurize/tokens.py:1 (featurize) imports training.registry (training)",
        "recommender/core/rows.py:2 (recommender.core) imports recommender.cli (recommender.cli)"]


def test_no_private_name_is_imported_from_outside_its_package():
    """A leading underscore means 'this package's own': scripts, benchmarks, tests and other packages use
    public names only."""
    found = []
    for path in sources(*PACKAGES, "scripts", "benchmarks", "tests"):
        mine = module_name(path).rsplit(".", 1)[0]
        for line, module, names in imports(path):
            theirs = module if (ROOT / module.replace(".", "/")).is_dir() else module.rsplit(".", 1)[0]
            private = [n for n in names if n.startswith("_") and n != "__version__"]
            if private and theirs != mine:
                found.append(f"{path.relative_to(ROOT)}:{line}: {', '.join(private)} from {module}")
    assert found == []


def test_the_cli_defines_each_option_once():
    """Options shared by commands are added by one helper in recommender/cli/options.py, never restated."""
    seen = collections.defaultdict(list)
    for path in sources("recommender/cli"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                        seen[arg.value].append(f"{path.name}:{node.lineno}")
    assert {flag: where for flag, where in seen.items() if len(where) > 1} == {}


def test_every_top_level_def_is_referenced_somewhere():
    """A def or class of the three packages whose name occurs nowhere else in the code is dead: delete it."""
    paths = sources(*PACKAGES, "scripts", "benchmarks", "tests")
    words = collections.Counter(w for p in paths for w in re.findall(r"\b\w+\b", p.read_text()))
    dead = [f"{p.relative_to(ROOT)}:{node.lineno}: {node.name}" for p in sources(*PACKAGES)
            for node in ast.parse(p.read_text()).body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and words[node.name] <= 1]
    assert dead == []


def test_recommender_holds_at_most_ten_entries():
    entries = [p.name for p in (ROOT / "recommender").iterdir() if p.name != "__pycache__"]
    assert len(entries) <= 10, sorted(entries)
