"""The sticky balancing algorithm (pure): keep what members own, then even out.

1. Claims: each partition goes to the member claiming it with the highest generation;
   a tie at the top means a stale or confused claim, so nobody keeps it. Claims on
   partitions that no longer exist or topics the member no longer wants are dropped.
2. Unclaimed partitions go, the ones with the fewest eligible members first, to the
   eligible member that has the fewest partitions.
3. While some member X holds a partition that an eligible member Y could take with
   ``count(Y) <= count(X) - 2``, move one from the fullest such X to the emptiest Y,
   preferring partitions X did not own before.

For members with equal subscriptions this ends with counts that differ by at most one,
and a member that owned ``k`` partitions keeps at least ``min(k, floor(P / M))`` of
them, because a move always starts at a member above the floor.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiokproto.structs import TopicPartition


def resolve_claims(
    partitions_per_topic: Mapping[str, int],
    topics_of: Mapping[str, frozenset[str]],
    claims: Mapping[str, tuple[frozenset[TopicPartition], int]],
) -> dict[TopicPartition, str]:
    """Partition -> the member that keeps it (see step 1)."""
    best: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member, (owned, generation) in claims.items():
        wanted = topics_of.get(member, frozenset())
        for tp in owned:
            if tp.topic not in wanted or not 0 <= tp.partition < partitions_per_topic.get(
                tp.topic, 0
            ):
                continue
            current = best.get(tp)
            if current is None or generation > current[0]:
                best[tp] = (generation, [member])
            elif generation == current[0]:
                current[1].append(member)
    return {tp: members[0] for tp, (_, members) in best.items() if len(members) == 1}


def sticky_balance(
    partitions_per_topic: Mapping[str, int],
    topics_of: Mapping[str, frozenset[str]],
    owners: Mapping[TopicPartition, str],
) -> dict[str, list[TopicPartition]]:
    """Member -> sorted partitions, keeping ``owners`` where balance allows."""
    members = sorted(topics_of)
    subscribers: dict[str, list[str]] = {}
    for member in members:
        for topic in topics_of[member]:
            if partitions_per_topic.get(topic, 0) > 0:
                subscribers.setdefault(topic, []).append(member)
    held: dict[str, set[TopicPartition]] = {m: set() for m in members}
    kept: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for tp, member in owners.items():
        if member in held and member in subscribers.get(tp.topic, ()):
            held[member].add(tp)
            kept[member].add(tp)

    taken = {tp for ps in held.values() for tp in ps}
    free = [
        TopicPartition(topic, p)
        for topic in subscribers
        for p in range(partitions_per_topic[topic])
        if TopicPartition(topic, p) not in taken
    ]
    free.sort(key=lambda tp: (len(subscribers[tp.topic]), tp))
    for tp in free:
        target = min(subscribers[tp.topic], key=lambda m: (len(held[m]), m))
        held[target].add(tp)

    while _move_one(held, kept, subscribers):
        pass
    return {m: sorted(held[m]) for m in members}


def _move_one(
    held: dict[str, set[TopicPartition]],
    kept: dict[str, set[TopicPartition]],
    subscribers: Mapping[str, list[str]],
) -> bool:
    for source in sorted(held, key=lambda m: (-len(held[m]), m)):
        count = len(held[source])
        if count < 2:
            return False
        # Per topic, the emptiest member that could take one of its partitions.
        lightest: dict[str, str] = {}
        for tp in held[source]:
            if tp.topic not in lightest:
                lightest[tp.topic] = min(subscribers[tp.topic], key=lambda m: (len(held[m]), m))
        candidates = [tp for tp in held[source] if len(held[lightest[tp.topic]]) <= count - 2]
        if candidates:
            # Give away what this member did not own before, and the last partitions first.
            tp = max(candidates, key=lambda tp: (tp not in kept[source], tp))
            held[source].remove(tp)
            held[lightest[tp.topic]].add(tp)
            return True
    return False
