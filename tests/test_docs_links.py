"""Every relative link in README.md and docs/ resolves (the file, and the heading its #anchor names), and every
repository path cited in backticks exists.

Pure text: no TVM, no imports of the package. A path in backticks is checked when it starts at one of the
repository's top-level folders or files (`recommender/rules/conv.py`, `models/llvm-znver3-2c/card.md`), or is a
bare test file name (`test_bank.py`, looked up under tests/); a `file.py::name` suffix must name a function or class
defined in the file; `#anchor` suffixes are dropped, and placeholders (`<key>`, `MODEL`, `M`, globs, `...`) are
skipped.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = ("recommender", "featurize", "training", "tests", "scripts", "benchmarks", "models", "docs",
       "Makefile", "pyproject.toml", "README.md")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`([^`]+)`")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
PLACEHOLDER = re.compile(r"[<>*{}$]|\.\.\.|^[A-Z][A-Z_0-9]*$")


def markdown_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def anchors(path: Path) -> set[str]:
    """The heading anchors GitHub gives a Markdown file (lower case, punctuation dropped, spaces as hyphens)."""
    text = FENCE.sub("", path.read_text())
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def broken_links(path: Path) -> list[str]:
    """Relative links of a Markdown file whose target does not exist (relative to the file), or whose #anchor
    names no heading of the Markdown file it points to."""
    bad = []
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        where = path.parent / file if file else path
        if not where.exists():
            bad.append(target)
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            bad.append(target)
    return bad


def cited(text: str) -> list[tuple[str, str]]:
    """Repository paths cited in inline code spans (fenced blocks left out), each with the `::name` it cites
    ('' for none); `#anchor` suffixes and surrounding punctuation dropped."""
    out = []
    for span in CODE_SPAN.findall(FENCE.sub("", text)):
        for token in span.split():
            token = token.strip(",;:.()'\"").split("#", 1)[0]
            if "=" in token:  # --out=DIR, NAME=models/...
                token = token.split("=", 1)[1]
            token, _, name = token.partition("::")
            first = token.split("/", 1)[0]
            if first in TOP and token not in TOP or re.fullmatch(r"test_\w+\.py", token):
                if not any(PLACEHOLDER.search(part) or part in ("M", "K") for part in token.split("/")):
                    out.append((token, name.split("::")[0].split("(")[0]))
    return out


def cited_paths(text: str) -> list[str]:
    return [path for path, _ in cited(text)]


def missing_paths(path: Path, root: Path = ROOT) -> list[str]:
    """Cited paths that do not exist, and cited `file.py::name`s whose file defines no such function or class."""
    missing = []
    for token, name in cited(path.read_text()):
        where = root / "tests" / token if "/" not in token else root / token
        if not where.exists():
            missing.append(token)
        elif name and where.suffix == ".py" and not re.search(rf"^\s*(async )?(def|class) {re.escape(name)}\b",
                                                               where.read_text(), re.M):
            missing.append(f"{token}::{name}")
    return missing


def test_every_relative_link_in_the_readme_and_docs_resolves():
    bad = {str(p.relative_to(ROOT)): broken for p in markdown_files() if (broken := broken_links(p))}
    assert not bad, f"links to missing files: {bad}"


def test_every_repository_path_cited_in_backticks_exists():
    bad = {str(p.relative_to(ROOT)): missing for p in markdown_files() if (missing := missing_paths(p))}
    assert not bad, f"cited paths that do not exist: {bad}"


def test_the_checks_catch_a_missing_file_and_skip_placeholders(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "models").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text("# Top `x`\n[ok](page.md#top-x) [gone](../models/nothing.md) [web](https://example.org) [here](#top)\n"
                    "`models/<key>/card.md`, `models/KEY/bank/`, `models/x/heldout/M`, `models/*/demo/*.json`,\n"
                    "`python benchmarks/gone.py --models a`, `recommender/x.py::f`, `test_gone.py::test_a`,\n"
                    "`tests/t.py::test_here`, `tests/t.py::test_not_here`\n"
                    "```sh\nschedrec replay --out models/in-a-fence/\n```\n")
    assert broken_links(page) == ["../models/nothing.md", "#top"]
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("def test_here():\n    pass\n")
    assert cited_paths(page.read_text()) == ["benchmarks/gone.py", "recommender/x.py", "test_gone.py", "tests/t.py",
                                             "tests/t.py"]
    assert missing_paths(page, tmp_path) == ["benchmarks/gone.py", "recommender/x.py", "test_gone.py",
                                             "tests/t.py::test_not_here"]
