"""Cases: which scenario, which answer and which mutation, from (seed, index) alone."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

from tests.faults.fuzz.corpus import Corpus, Exchange
from tests.faults.fuzz.mutations import MUTATIONS, NEEDS
from tests.faults.fuzz.scenarios import SCENARIOS
from tests.faults.fuzz.spots import spots
from tests.faults.fuzz.wire import response_body

REPLAYED: tuple[str, ...] = tuple(SCENARIOS)
NO_MUTATION = "none"


@dataclass(frozen=True, slots=True)
class Plan:
    seed: int
    index: int
    scenario: str
    mutation: str  # a key of MUTATIONS, or NO_MUTATION
    api_key: int  # the answer to mutate: the ``occurrence``-th (0-based) answer of
    occurrence: int  # this API in the case
    target: int  # index of the recorded exchange the target was planned on

    @property
    def case_id(self) -> str:
        return f"{self.seed}:{self.index}"


@cache
def _has(exchange: Exchange, kind: str, name: str | None) -> bool:
    body = response_body(exchange.api_key, exchange.version, exchange.response)
    try:
        found = spots(exchange.api_key, exchange.version, body)
    except Exception:
        return False
    return any(s.kind == kind and (name is None or s.name.endswith(name)) for s in found)


def applicable(mutation: str, exchange: Exchange) -> bool:
    need = NEEDS.get(mutation)
    return need is None or _has(exchange, *need)


def plan_case(corpus: Corpus, seed: int, index: int, mutation: str | None = None) -> Plan:
    """The case ``index`` of run ``seed``: scenarios in turn, then a random mutation and a
    random recorded answer of that scenario the mutation can apply to."""
    rng = random.Random(f"plan:{seed}:{index}")
    scenario = REPLAYED[index % len(REPLAYED)]
    recorded = corpus.of(scenario)
    kinds = sorted(MUTATIONS)
    chosen = mutation or rng.choice(kinds)
    candidates = [i for i, e in enumerate(recorded) if applicable(chosen, e)]
    while not candidates:  # e.g. record batches in a scenario without Fetch
        chosen = rng.choice(kinds)
        candidates = [i for i, e in enumerate(recorded) if applicable(chosen, e)]
    target = rng.choice(candidates)
    api_key = recorded[target].api_key
    occurrence = sum(1 for e in recorded[:target] if e.api_key == api_key)
    return Plan(seed, index, scenario, chosen, api_key, occurrence, target)


def baseline(seed: int, index: int) -> Plan:
    """An unmutated run of a scenario."""
    return Plan(seed, index, REPLAYED[index % len(REPLAYED)], NO_MUTATION, -1, -1, -1)
