"""The API reference shows every public member of the clients and nothing internal.

Reads the inventory (objects.inv) mkdocstrings writes into site/ when ``make docs``
builds the site, which ``make test`` does before pytest; skipped when no site was built.
"""

from __future__ import annotations

import importlib
import zlib
from pathlib import Path
from typing import TypeVar

import pytest

from aiokproto import Admin, Consumer, Producer, ShareConsumer
from aiokproto.producer import BatchDelivery, DeliveryFuture

INVENTORY = Path(__file__).resolve().parents[2] / "site" / "objects.inv"

#: the documented path of each class whose members must all be on its page
CLASSES = {
    "aiokproto.admin.Admin": Admin,
    "aiokproto.consumer.Consumer": Consumer,
    "aiokproto.producer.Producer": Producer,
    "aiokproto.share.ShareConsumer": ShareConsumer,
    "aiokproto.producer.DeliveryFuture": DeliveryFuture,
    "aiokproto.producer.BatchDelivery": BatchDelivery,
}


def _inventory() -> dict[str, str]:
    """Python object name -> its role (``py:method``...), from the Sphinx inventory."""
    if not INVENTORY.exists():
        pytest.skip("no site/objects.inv: build the site first (make docs)")
    header, _, body = INVENTORY.read_bytes().partition(b"zlib.\n")
    assert b"Sphinx inventory version 2" in header
    out = {}
    for line in zlib.decompress(body).decode().splitlines():
        name, role = line.split(" ", 2)[:2]
        if role.startswith("py:"):
            out[name] = role
    return out


def _public(cls: type) -> set[str]:
    names = set()
    for name in dir(cls):
        if name.startswith("_"):
            continue
        # asyncio.Future's own API is Python's, documented there
        if any(
            name in vars(base)
            for base in cls.__mro__[1:]
            if base.__module__ == "asyncio.futures" or base.__module__ == "_asyncio"
        ):
            continue
        names.add(name)
    return names


def test_every_public_member_of_the_clients_is_on_its_page_and_nothing_else() -> None:
    inventory = _inventory()
    problems = []
    for path, cls in CLASSES.items():
        assert path in inventory, f"{path} is not in the reference"
        shown = {n[len(path) + 1 :] for n in inventory if n.startswith(path + ".")}
        shown = {n for n in shown if "." not in n}
        want = _public(cls)
        if missing := want - shown:
            problems.append(f"{path}: not rendered: {sorted(missing)}")
        if extra := shown - want:
            problems.append(f"{path}: rendered but not public API: {sorted(extra)}")
    assert not problems, "\n".join(problems)
    assert len(_public(Admin)) >= 36


def _resolve(name: str) -> object:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise AssertionError(f"{name} does not resolve")


def test_no_reference_page_shows_a_private_name_or_a_type_variable() -> None:
    inventory = _inventory()
    private = [n for n in inventory if any(p.startswith("_") for p in n.split("."))]
    assert not private, private
    typevars = [
        n for n, role in inventory.items() if role == "py:data" and isinstance(_resolve(n), TypeVar)
    ]
    assert not typevars, typevars
