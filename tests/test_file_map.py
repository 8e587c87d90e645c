"""docs/DESIGN.md's file map is generated from the module docstrings (tools/file_map.py),
so it lists every module and says what each one's docstring says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import file_map

BEGIN, END = file_map.BEGIN, file_map.END


def test_the_file_map_is_generated_from_the_docstrings() -> None:
    page = file_map.PAGE.read_text()
    assert file_map.render_page(page) == page, (
        "docs/DESIGN.md's file map is stale: run python -m tools.file_map"
    )
    assert file_map.main(["--check"]) == 0
    for module in Path(file_map.ROOT, "aiokproto").rglob("*.py"):
        rel = module.relative_to(file_map.ROOT)
        if file_map.GENERATED in rel.parents:
            continue
        assert f"| `{file_map.entry(module)}` |" in page, rel


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_rows_are_first_paragraphs_packages_before_their_modules(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "aiokproto/__init__.py": '"""The package."""\n',
            "aiokproto/zeta.py": '"""Zeta ``z``\nwrapped | piped.\n\nNot this paragraph."""\n',
            "aiokproto/sub/__init__.py": '"""Sub package."""\n',
            "aiokproto/sub/alpha.py": '"""Alpha."""\n',
            "aiokproto/protocol/messages/__init__.py": '"""Generated codecs."""\n',
            "aiokproto/protocol/messages/fetch.py": "x = 1\n",
            "aiokproto/protocol/__init__.py": '"""Protocol."""\n',
            "aiokproto/_accel.c": "/* _accel: compiled.\n *\n * Details.\n */\nint x;\n",
            "tools/gen.py": '"""A tool."""\n',
        },
    )
    assert file_map.render_table(tmp_path).splitlines()[2:] == [
        "| `aiokproto/` | The package. |",
        "| `aiokproto/_accel.c` | _accel: compiled. |",
        "| `aiokproto/zeta.py` | Zeta `z` wrapped \\| piped. |",
        "| `aiokproto/protocol/` | Protocol. |",
        "| `aiokproto/protocol/messages/` | Generated codecs. |",
        "| `aiokproto/sub/` | Sub package. |",
        "| `aiokproto/sub/alpha.py` | Alpha. |",
        "| `tools/gen.py` | A tool. |",
    ]


def test_a_module_without_a_docstring_fails_the_generator(tmp_path: Path) -> None:
    _tree(tmp_path, {"aiokproto/__init__.py": '"""Package."""\n', "aiokproto/new.py": "x = 1\n"})
    with pytest.raises(file_map.FileMapError, match=r"aiokproto/new\.py has no docstring"):
        file_map.render_table(tmp_path)


def test_the_table_is_replaced_between_the_markers_only(tmp_path: Path) -> None:
    _tree(tmp_path, {"aiokproto/__init__.py": '"""Package."""\n'})
    page = f"# Design\n\n{BEGIN}\n| stale |\n{END}\n\n## Invariants\n"
    assert file_map.render_page(page, tmp_path) == (
        f"# Design\n\n{BEGIN}\n| path | what it holds |\n|---|---|\n"
        f"| `aiokproto/` | Package. |\n{END}\n\n## Invariants\n"
    )
    with pytest.raises(file_map.FileMapError, match="lacks the markers"):
        file_map.render_page("# Design without markers\n", tmp_path)
