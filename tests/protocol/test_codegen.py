"""The committed generated files are what the generator produces."""

from __future__ import annotations

from tools.codegen.__main__ import check, generate


def test_codegen_check_passes() -> None:
    problems = check(generate())
    assert problems == [], "\n".join(problems)


def test_output_is_deterministic() -> None:
    assert generate() == generate()
