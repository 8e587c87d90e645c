"""Where a module's tests are: every hand-written module of ``aiokproto/`` has its unit
tests (no broker) at ``tests/unit/<package path>/test_<module>.py``, or a line in
``tests/unit/exemptions.txt`` naming the test file that covers it instead; a unit file
whose module is gone (renamed, split) fails too.

``aiokproto/protocol/messages`` is generated (``tools/codegen``) and left out. Leading
and trailing underscores are dropped from the module name: ``__init__.py`` maps to
``test_init.py``, ``_batch.py`` to ``test_batch.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "aiokproto"
UNIT = ROOT / "tests" / "unit"
EXEMPTIONS = UNIT / "exemptions.txt"
GENERATED = PACKAGE / "protocol" / "messages"
_LINE = re.compile(r"(?P<module>aiokproto/\S+\.py): covered by (?P<test>tests/\S+)(?: \(.+\))?")


def modules() -> list[str]:
    return sorted(
        p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py") if GENERATED not in p.parents
    )


def unit_file(module: str) -> str:
    """``aiokproto/a/b.py`` -> ``tests/unit/a/test_b.py``."""
    path = Path(module).relative_to("aiokproto")
    return (Path("tests/unit") / path.parent / f"test_{path.stem.strip('_')}.py").as_posix()


def exemptions(text: str) -> dict[str, str]:
    """module -> the test path that covers it; a malformed or repeated line raises."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise ValueError(f"exemptions.txt:{number}: not '<module>: covered by <test>': {line}")
        if match["module"] in found:
            raise ValueError(f"exemptions.txt:{number}: {match['module']} listed twice")
        found[match["module"]] = match["test"]
    return found


def layout_problems(all_modules: list[str], exempt: dict[str, str], exists: set[str]) -> list[str]:
    problems = []
    for module in all_modules:
        if unit_file(module) not in exists and module not in exempt:
            problems.append(
                f"{module}: no {unit_file(module)} and no line in tests/unit/exemptions.txt"
            )
    for module, test in exempt.items():
        if module not in all_modules:
            problems.append(f"exemptions.txt names {module}, which no longer exists")
        elif unit_file(module) in exists:
            problems.append(f"exemptions.txt names {module}, which has {unit_file(module)}")
        if test not in exists:
            problems.append(f"exemptions.txt: {module} is covered by {test}, which does not exist")
    mirrors = {unit_file(module) for module in all_modules}
    for path in sorted(exists):
        name = path.rpartition("/")[2]
        if path.startswith("tests/unit/") and name.startswith("test_") and path.endswith(".py"):
            if path not in mirrors:
                problems.append(f"{path} is the unit file of no module of aiokproto/")
    return problems


def existing() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("*")}


def test_every_module_has_a_unit_test_file_or_a_stated_exemption() -> None:
    problems = layout_problems(modules(), exemptions(EXEMPTIONS.read_text()), existing())
    assert not problems, "\n".join(problems)


def test_two_modules_never_share_a_unit_file() -> None:
    by_file: dict[str, list[str]] = {}
    for module in modules():
        by_file.setdefault(unit_file(module), []).append(module)
    assert not {f: m for f, m in by_file.items() if len(m) > 1}


def test_the_check_names_what_is_wrong() -> None:
    all_modules = ["aiokproto/a.py", "aiokproto/b.py", "aiokproto/pkg/c.py"]
    exempt = {"aiokproto/b.py": "tests/b_scenario.py", "aiokproto/gone.py": "tests/x.py"}
    exists = {"tests/unit/pkg/test_c.py", "tests/x.py"}
    assert layout_problems(all_modules, exempt, exists) == [
        "aiokproto/a.py: no tests/unit/test_a.py and no line in tests/unit/exemptions.txt",
        "exemptions.txt: aiokproto/b.py is covered by tests/b_scenario.py, which does not exist",
        "exemptions.txt names aiokproto/gone.py, which no longer exists",
    ]
    exempt = {"aiokproto/pkg/c.py": "tests/x.py"}
    assert layout_problems(all_modules[2:], exempt, exists) == [
        "exemptions.txt names aiokproto/pkg/c.py, which has tests/unit/pkg/test_c.py"
    ]
    # a module renamed without its unit file
    assert layout_problems(["aiokproto/pkg/d.py"], {}, exists | {"tests/unit/test_d.py"}) == [
        "aiokproto/pkg/d.py: no tests/unit/pkg/test_d.py and no line in tests/unit/exemptions.txt",
        "tests/unit/pkg/test_c.py is the unit file of no module of aiokproto/",
        "tests/unit/test_d.py is the unit file of no module of aiokproto/",
    ]


def test_unit_file_mapping() -> None:
    assert unit_file("aiokproto/consumer/group/reconcile.py") == (
        "tests/unit/consumer/group/test_reconcile.py"
    )
    assert unit_file("aiokproto/admin/_batch.py") == "tests/unit/admin/test_batch.py"
    assert unit_file("aiokproto/__init__.py") == "tests/unit/test_init.py"


def test_a_malformed_exemption_line_is_refused() -> None:
    with pytest.raises(ValueError, match="not '<module>: covered by <test>'"):
        exemptions("aiokproto/a.py because reasons")
