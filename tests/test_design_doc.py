"""docs/DESIGN.md names, for each invariant, the test that fails when it is broken: every
test it names, every file it cites and every ``file.py::test`` must exist, so a renamed
or moved test cannot leave an invariant pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "DESIGN.md"
#: cited paths that a run creates (git-ignored), not the repository
MADE_BY_A_RUN = frozenset({"benchmarks/results/"})
_TREES = "tests|benchmarks|tools|aiokproto|docs|examples"
_PATH = re.compile(rf"(?<![\w/.])((?:{_TREES})/[\w./-]*\w/?)(?:::(test_\w+))?")
_NAME = re.compile(r"(?<![\w/:.])(test_\w+)(?![\w/.])")
_FILE = re.compile(r"(?<![\w/])(test_\w+\.py)\b")


def _test_sources() -> list[Path]:
    return [*ROOT.glob("tests/**/*.py"), *ROOT.glob("benchmarks/**/*.py")]


def _defined(path: Path) -> set[str]:
    return set(re.findall(r"^\s*(?:async\s+)?def (test_\w+)", path.read_text(), re.M))


def citation_problems(text: str, root: Path, sources: list[Path]) -> list[str]:
    problems = []
    defined = {name for source in sources for name in _defined(source)}
    basenames = {source.name for source in sources}
    for path, test in sorted(set(_PATH.findall(text))):
        if path in MADE_BY_A_RUN:
            continue
        if not (root / path).exists():
            problems.append(f"{path} does not exist")
        elif test and test not in _defined(root / path):
            problems.append(f"{path} has no {test}")
    for name in sorted(set(_NAME.findall(text)) - defined):
        problems.append(f"no test is named {name}")
    for name in sorted(set(_FILE.findall(text)) - basenames):
        problems.append(f"no test file is named {name}")
    return problems


def test_every_test_and_file_design_md_names_exists() -> None:
    problems = citation_problems(DESIGN.read_text(), ROOT, _test_sources())
    assert not problems, "docs/DESIGN.md cites what is not there:\n" + "\n".join(problems)


def test_the_check_catches_a_renamed_or_moved_test(tmp_path: Path) -> None:
    source = tmp_path / "tests" / "unit" / "test_a.py"
    source.parent.mkdir(parents=True)
    source.write_text("def test_kept() -> None:\n    pass\n")
    text = (
        "(`tests/unit/test_a.py::test_kept`, `test_kept`) "
        "(`tests/unit/test_a.py::test_renamed`, `test_gone`, `tests/old/test_a.py`, "
        "`test_b.py`, [CHANGELOG.md](https://github.com/aiokproto/aiokproto/blob/x))"
    )
    assert citation_problems(text, tmp_path, [source]) == [
        "tests/old/test_a.py does not exist",
        "tests/unit/test_a.py has no test_renamed",
        "no test is named test_gone",
        "no test file is named test_b.py",
    ]
