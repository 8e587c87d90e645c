# Types of the compiled module built from _arrow.c (see aiokproto/spark/arrow.py).

from typing import Any

def arrow_columns(
    records: list[Any] | tuple[Any, ...],
    cls: type[tuple[Any, ...]],
    include_headers: bool,
    /,
) -> tuple[Any, ...]: ...
