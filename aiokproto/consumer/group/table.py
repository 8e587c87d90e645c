"""What the two sans-I/O membership machines (``classic_machine.py``, classic;
``consumer_machine.py``, KIP-848) share: a table's ``Transition`` (next state,
actions) and ``complete_table``, which makes a table total (every state x every
input; an input a state does not list leaves it where it is, with no actions)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

StateT = TypeVar("StateT", bound=enum.Enum)
InputT = TypeVar("InputT", bound=enum.Enum)
ActionT = TypeVar("ActionT", bound=enum.Enum)


@dataclass(frozen=True, slots=True)
class Transition(Generic[StateT, ActionT]):
    next: StateT
    actions: tuple[ActionT, ...] = ()


def complete_table(
    listed: Mapping[StateT, Mapping[InputT, Transition[StateT, ActionT]]],
    states: type[StateT],
    inputs: type[InputT],
) -> dict[tuple[StateT, InputT], Transition[StateT, ActionT]]:
    """Every (state, input): the listed transition, else ``Transition(state)``."""
    return {
        (state, inp): listed[state].get(inp, Transition(state))
        for state in states
        for inp in inputs
    }
