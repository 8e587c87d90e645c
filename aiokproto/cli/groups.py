"""``aiokproto groups list|describe|lag|delete|reset-offsets`` (reset-offsets is a dry
run unless ``--execute``)."""

from __future__ import annotations

from typing import Any

import click

from aiokproto.admin import Admin, AdminBatchError, ConsumerGroupDescription, OffsetSpec
from aiokproto.cli.common import (
    CliError,
    Settings,
    command,
    err,
    out,
    print_json,
    progress,
    table,
    usage,
)
from aiokproto.cli.plan import (
    Move,
    PlanError,
    choose_target,
    lag_rows,
    parse_topic_spec,
    plan_reset,
)
from aiokproto.errors import GroupIdNotFoundError
from aiokproto.structs import TopicPartition

groups = click.Group("groups", help="Consumer groups: list, describe, lag, delete, reset offsets.")

#: partitions per AlterConsumerGroupOffsets request while resetting (one progress step)
_RESET_CHUNK = 50


@command(groups, "list")
@click.option("--state", "states", multiple=True, help="Only groups in this state (repeatable).")
async def list_groups(settings: Settings, states: tuple[str, ...]) -> None:
    """Consumer groups with their type and state."""
    async with settings.admin() as admin:
        listing = await admin.list_consumer_groups(states=states or None)
    data = [
        {"group_id": g.group_id, "type": g.type, "state": g.state,
         "protocol_type": g.protocol_type}
        for g in listing
    ]
    if settings.json:
        print_json(data)
        return
    rows = [[g["group_id"], g["type"], g["state"]] for g in data]
    out.print(table(None, ["Group", "Type", "State"], rows))


def _group_data(desc: ConsumerGroupDescription) -> dict[str, Any]:
    return {
        "group_id": desc.group_id,
        "type": desc.type,
        "state": desc.state,
        "assignor": desc.partition_assignor,
        "coordinator": desc.coordinator.node_id,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "instance_id": m.group_instance_id,
                "assignment": [f"{tp.topic}-{tp.partition}" for tp in sorted(m.assignment)],
            }
            for m in desc.members
        ],
    }


@command(groups, "describe")
@click.argument("group_ids", nargs=-1, required=True, metavar="GROUP...")
async def describe_groups(settings: Settings, group_ids: tuple[str, ...]) -> None:
    """State, assignor, coordinator and members of groups."""
    async with settings.admin() as admin:
        found = await admin.describe_consumer_groups(group_ids)
    data = [_group_data(found[g]) for g in group_ids]
    if settings.json:
        print_json(data)
        return
    for g in data:
        title = (
            f"[bold]{g['group_id']}[/]  {g['type']}  state {g['state']}  "
            f"assignor {g['assignor'] or '-'}  coordinator {g['coordinator']}"
        )
        rows = [
            [m["member_id"], m["client_id"], m["host"], ", ".join(m["assignment"])]
            for m in g["members"]
        ]
        out.print(table(title, ["Member", "Client", "Host", "Assignment"], rows))


async def _check_exists(admin: Admin, group_id: str) -> ConsumerGroupDescription:
    desc = (await admin.describe_consumer_groups([group_id]))[group_id]
    if desc.state == "Dead":  # what an older broker says of a group it does not know
        raise CliError(f"consumer group {group_id!r} does not exist")
    return desc


@command(groups, "lag")
@click.argument("group_id", metavar="GROUP")
async def group_lag(settings: Settings, group_id: str) -> None:
    """Committed offset, end offset and lag of every partition of a group."""
    async with settings.admin() as admin:
        desc = await _check_exists(admin, group_id)
        committed = {
            tp: om.offset
            for tp, om in (await admin.list_consumer_group_offsets(group_id)).items()
        }
        owners = {tp: m.client_id or m.member_id for m in desc.members for tp in m.assignment}
        wanted = set(committed) | set(owners)
        ends = {
            tp: r.offset
            for tp, r in (await admin.list_offsets(dict.fromkeys(wanted, OffsetSpec.latest())))
            .items()
        } if wanted else {}
    rows = lag_rows(committed, ends, owners)
    total = sum(r.lag or 0 for r in rows)
    if settings.json:
        print_json({
            "group_id": group_id,
            "state": desc.state,
            "total_lag": total,
            "partitions": [
                {"topic": r.partition.topic, "partition": r.partition.partition,
                 "current": r.current, "end": r.end, "lag": r.lag, "member": r.member}
                for r in rows
            ],
        })
        return
    title = f"[bold]{group_id}[/]  state {desc.state}  total lag {total}"
    out.print(table(
        title,
        ["Topic", "Partition", "Current", "End", "Lag", "Member"],
        [[r.partition.topic, r.partition.partition, r.current, r.end, r.lag, r.member]
         for r in rows],
    ))


@command(groups, "delete")
@click.argument("group_ids", nargs=-1, required=True, metavar="GROUP...")
async def delete_groups(settings: Settings, group_ids: tuple[str, ...]) -> None:
    """Delete groups that have no active members (and their committed offsets)."""
    async with settings.admin() as admin:
        await admin.delete_consumer_groups(group_ids)
    if settings.json:
        print_json({"deleted": list(group_ids)})
        return
    for g in group_ids:
        out.print(f"deleted group {g}", highlight=False)


async def _partitions(
    admin: Admin, group_id: str, topic_specs: tuple[str, ...], all_topics: bool
) -> list[TopicPartition]:
    if all_topics:
        if topic_specs:
            usage("give --topic or --all-topics, not both")
        found = sorted(await admin.list_consumer_group_offsets(group_id))
        if not found:
            raise CliError(f"group {group_id!r} has no committed offsets; name the --topic")
        return found
    if not topic_specs:
        usage("give --topic TOPIC[:P,...] (repeatable) or --all-topics")
    specs = []
    for spec in topic_specs:
        try:
            specs.append(parse_topic_spec(spec))
        except PlanError as exc:
            usage(str(exc))
    described = await admin.describe_topics({t for t, _ in specs})
    tps: set[TopicPartition] = set()
    for topic, parts in specs:
        have = {p.partition for p in described[topic].partitions}
        chosen = have if parts is None else set(parts)
        if not chosen <= have:
            raise CliError(f"topic {topic!r} has no partition {sorted(chosen - have)[0]}")
        tps.update(TopicPartition(topic, p) for p in chosen)
    return sorted(tps)


@command(groups, "reset-offsets")
@click.argument("group_id", metavar="GROUP")
@click.option("--topic", "topic_specs", multiple=True, metavar="TOPIC[:P,...]",
              help="Topic (all partitions) or topic:0,1 (repeatable).")
@click.option("--all-topics", is_flag=True, help="Every topic the group has offsets for.")
@click.option("--to-earliest", is_flag=True, help="To the first offset still in the log.")
@click.option("--to-latest", is_flag=True, help="To the end of each partition.")
@click.option("--to-offset", type=int, metavar="N", help="To offset N (kept within the log).")
@click.option("--to-datetime", metavar="WHEN",
              help="To the first record at or after WHEN: 2024-05-01T12:00:00[Z|+hh:mm] "
              "(local time without a zone) or ms since the epoch.")
@click.option("--shift-by", type=int, metavar="N", help="Move by N records (negative: back).")
@click.option("--dry-run", "mode", flag_value="dry-run", default=True,
              help="Show the plan only (the default, as Kafka's tool).")
@click.option("--execute", "mode", flag_value="execute", help="Commit the new offsets.")
async def reset_offsets(
    settings: Settings,
    group_id: str,
    topic_specs: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    mode: str,
) -> None:
    """Move a group's committed offsets; the group must have no active members.

    Without --execute it only prints the plan (current and new offset per partition).
    """
    try:
        target = choose_target(to_earliest, to_latest, to_offset, to_datetime, shift_by)
    except PlanError as exc:
        usage(str(exc))
    execute = mode == "execute"
    async with settings.admin() as admin:
        try:
            desc = (await admin.describe_consumer_groups([group_id]))[group_id]
        except AdminBatchError as exc:
            if not isinstance(exc.errors.get(group_id), GroupIdNotFoundError):
                raise
            desc = None  # as Kafka's tool: committing offsets creates the group
        if execute and desc is not None and desc.state not in ("Empty", "Dead"):
            raise CliError(
                f"group {group_id!r} is {desc.state} with {len(desc.members)} member(s): "
                "stop its consumers before resetting offsets"
            )
        tps = await _partitions(admin, group_id, topic_specs, all_topics)
        committed = {
            tp: om.offset
            for tp, om in (await admin.list_consumer_group_offsets(group_id, tps)).items()
        }
        earliest = await admin.list_offsets(dict.fromkeys(tps, OffsetSpec.earliest()))
        latest = await admin.list_offsets(dict.fromkeys(tps, OffsetSpec.latest()))
        by_time = None
        if target.kind == "datetime":
            answers = await admin.list_offsets(
                dict.fromkeys(tps, OffsetSpec.for_timestamp(target.value))
            )
            by_time = {tp: r.offset for tp, r in answers.items()}
        moves = plan_reset(
            target,
            tps,
            committed,
            {tp: r.offset for tp, r in earliest.items()},
            {tp: r.offset for tp, r in latest.items()},
            by_time,
        )
        if execute:
            await _apply(admin, group_id, moves)
    _show_moves(settings, group_id, moves, execute)


async def _apply(admin: Admin, group_id: str, moves: list[Move]) -> None:
    with progress() as bar:
        task = bar.add_task(f"resetting {group_id}", total=len(moves), rate="")
        for i in range(0, len(moves), _RESET_CHUNK):
            chunk = moves[i : i + _RESET_CHUNK]
            await admin.alter_consumer_group_offsets(group_id, {m.partition: m.new for m in chunk})
            bar.advance(task, len(chunk))


def _show_moves(settings: Settings, group_id: str, moves: list[Move], executed: bool) -> None:
    if settings.json:
        print_json({
            "group_id": group_id,
            "executed": executed,
            "partitions": [
                {"topic": m.partition.topic, "partition": m.partition.partition,
                 "current": m.current, "new": m.new}
                for m in moves
            ],
        })
        return
    title = f"[bold]{group_id}[/]  " + ("offsets reset" if executed else "plan (dry run)")
    out.print(table(
        title,
        ["Topic", "Partition", "Current", "New"],
        [[m.partition.topic, m.partition.partition, m.current, m.new] for m in moves],
    ))
    if not executed:
        err.print("dry run: nothing changed; add --execute to commit these offsets")
