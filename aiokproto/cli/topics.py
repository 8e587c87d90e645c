"""``aiokproto topics list|describe|create|delete|alter`` and ``aiokproto cluster describe``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import click

from aiokproto.admin import (
    Admin,
    AdminBatchError,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    NewPartitions,
    NewTopic,
    TopicDescription,
)
from aiokproto.cli.common import CliError, Settings, command, out, print_json, table, usage
from aiokproto.errors import (
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)

topics = click.Group("topics", help="List, describe, create, delete and alter topics.")
cluster = click.Group("cluster", help="The cluster's id, controller and brokers.")


def parse_pairs(values: Iterable[str], what: str) -> dict[str, str]:
    """``name=value`` strings into a dict; a malformed one is a usage error."""
    pairs: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            usage(f"{what} takes name=value, not {item!r}")
        pairs[name.strip()] = value
    return pairs


async def wait_visible(admin: Admin, names: set[str], present: bool, timeout_s: float) -> None:
    """Wait until metadata shows (or stops showing) the topics: the controller commits
    first and the brokers' caches follow, and the next command should see the change."""
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                listed = set(await admin.list_topics())
                if (names <= listed) if present else not (names & listed):
                    return
                await asyncio.sleep(0.05)
    except TimeoutError:
        pass  # done on the controller; metadata just lags: not worth failing over


def _is_missing(exc: KafkaError) -> bool:
    return isinstance(exc, UnknownTopicOrPartitionError | UnknownTopicIdError)


@command(topics, "list")
@click.option("--internal", is_flag=True, help="Include internal topics (__consumer_offsets...).")
async def list_topics(settings: Settings, internal: bool) -> None:
    """Topic names, one per line (a JSON list with --output json)."""
    async with settings.admin() as admin:
        names = await admin.list_topics(include_internal=internal)
    if settings.json:
        print_json(names)
    else:
        for name in names:
            out.print(name, highlight=False)


def _topic_data(desc: TopicDescription, configs: dict[str, str | None]) -> dict[str, Any]:
    return {
        "name": desc.name,
        "topic_id": str(desc.topic_id) if desc.topic_id else None,
        "is_internal": desc.is_internal,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
            }
            for p in desc.partitions
        ],
        "configs": configs,
    }


@command(topics, "describe")
@click.argument("names", nargs=-1, required=True, metavar="TOPIC...")
async def describe_topics(settings: Settings, names: tuple[str, ...]) -> None:
    """Partitions (leader, replicas, ISR) and the configs set on each topic."""
    async with settings.admin() as admin:
        found = await admin.describe_topics(names)
        resources = {n: ConfigResource(ConfigResourceType.TOPIC, n) for n in names}
        configs = await admin.describe_configs(resources.values())
    data = []
    for name in names:
        desc = found[name]
        entries = configs.get(resources[name], {})
        # the topic's own settings, not the broker-wide values it inherits
        own = {
            k: e.value
            for k, e in sorted(entries.items())
            if e.source is ConfigSource.DYNAMIC_TOPIC_CONFIG
        }
        data.append(_topic_data(desc, own))
    if settings.json:
        print_json(data)
        return
    for topic in data:
        parts = topic["partitions"]
        rf = len(parts[0]["replicas"]) if parts else 0
        configs_text = ", ".join(f"{k}={v}" for k, v in topic["configs"].items()) or "(defaults)"
        rows = [
            [p["partition"], p["leader"], ",".join(map(str, p["replicas"])),
             ",".join(map(str, p["isr"]))]
            for p in parts
        ]
        title = (
            f"[bold]{topic['name']}[/]  id {topic['topic_id']}  partitions {len(parts)}  "
            f"replication {rf}\nconfigs: {configs_text}"
        )
        out.print(table(title, ["Partition", "Leader", "Replicas", "ISR"], rows))


@command(topics, "create")
@click.argument("names", nargs=-1, required=True, metavar="TOPIC...")
@click.option("--partitions", "-p", type=click.IntRange(min=1), help="[default: broker's]")
@click.option("--replication-factor", "-r", type=click.IntRange(min=1), help="[default: broker's]")
@click.option("--topic-config", "-C", "configs", multiple=True, metavar="NAME=VALUE",
              help="A topic config, e.g. cleanup.policy=compact (repeatable).")
@click.option("--if-not-exists", is_flag=True, help="A topic that exists already is not an error.")
async def create_topics(
    settings: Settings,
    names: tuple[str, ...],
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
) -> None:
    """Create topics."""
    topic_configs: dict[str, str | None] = dict(parse_pairs(configs, "--topic-config"))
    new = [
        NewTopic(n, partitions or -1, replication_factor or -1, topic_configs=topic_configs)
        for n in names
    ]
    async with settings.admin() as admin:
        try:
            created = dict(await admin.create_topics(new))
            existed: list[str] = []
        except AdminBatchError as exc:
            existed = [n for n, e in exc.errors.items() if isinstance(e, TopicAlreadyExistsError)]
            if not if_not_exists or len(existed) < len(exc.errors):
                raise
            created = dict(exc.results)
        await wait_visible(admin, set(created), True, settings.timeout_ms / 1000)
    result = [
        {"name": c.name, "topic_id": str(c.topic_id) if c.topic_id else None,
         "partitions": c.num_partitions, "replication_factor": c.replication_factor,
         "created": True}
        for c in created.values()
    ] + [{"name": n, "created": False} for n in existed]
    if settings.json:
        print_json(result)
        return
    for r in result:
        if r["created"]:
            out.print(
                f"created topic {r['name']} ({r['partitions']} partitions, "
                f"replication {r['replication_factor']})", highlight=False
            )
        else:
            out.print(f"topic {r['name']} exists already", highlight=False)


@command(topics, "delete")
@click.argument("names", nargs=-1, required=True, metavar="TOPIC...")
@click.option("--if-exists", is_flag=True, help="A topic that does not exist is not an error.")
async def delete_topics(settings: Settings, names: tuple[str, ...], if_exists: bool) -> None:
    """Delete topics (and every record in them)."""
    missing: list[str] = []
    async with settings.admin() as admin:
        try:
            await admin.delete_topics(names)
        except AdminBatchError as exc:
            missing = [str(n) for n, e in exc.errors.items() if _is_missing(e)]
            if not if_exists or len(missing) < len(exc.errors):
                raise
        deleted = [n for n in names if n not in missing]
        await wait_visible(admin, set(deleted), False, settings.timeout_ms / 1000)
    if settings.json:
        print_json({"deleted": deleted, "missing": missing})
        return
    for name in deleted:
        out.print(f"deleted topic {name}", highlight=False)
    for name in missing:
        out.print(f"topic {name} does not exist", highlight=False)


@command(topics, "alter")
@click.argument("name", metavar="TOPIC")
@click.option("--partitions", "-p", type=click.IntRange(min=1),
              help="Grow the topic to this many partitions.")
@click.option("--topic-config", "-C", "configs", multiple=True, metavar="NAME=VALUE",
              help="Set a topic config (repeatable).")
@click.option("--delete-config", multiple=True, metavar="NAME",
              help="Remove a topic config: back to the broker default (repeatable).")
async def alter_topic(
    settings: Settings,
    name: str,
    partitions: int | None,
    configs: tuple[str, ...],
    delete_config: tuple[str, ...],
) -> None:
    """Add partitions to a topic and set or remove its configs."""
    sets = parse_pairs(configs, "--topic-config")
    if partitions is None and not sets and not delete_config:
        usage("nothing to alter: give --partitions, --topic-config or --delete-config")
    ops = [AlterConfigOp(k, v) for k, v in sets.items()] + [
        AlterConfigOp(k, op_type=AlterConfigOpType.DELETE) for k in delete_config
    ]
    done: dict[str, Any] = {"topic": name}
    async with settings.admin() as admin:
        desc = (await admin.describe_topics([name]))[name]  # a clear error if it is missing
        if partitions is not None:
            now = len(desc.partitions)
            if partitions < now:
                raise CliError(f"{name} has {now} partitions; Kafka cannot remove partitions")
            if partitions > now:
                await admin.create_partitions({name: NewPartitions(partitions)})
            done["partitions"] = {"before": now, "after": partitions}
        if ops:
            resource = ConfigResource(ConfigResourceType.TOPIC, name)
            await admin.incremental_alter_configs({resource: ops})
            done["set"] = sets
            done["deleted"] = list(delete_config)
    if settings.json:
        print_json(done)
        return
    if "partitions" in done:
        before, after = done["partitions"]["before"], done["partitions"]["after"]
        out.print(f"{name}: partitions {before} -> {after}", highlight=False)
    for k, v in sets.items():
        out.print(f"{name}: set {k}={v}", highlight=False)
    for k in delete_config:
        out.print(f"{name}: removed {k}", highlight=False)


@command(cluster, "describe")
async def describe_cluster(settings: Settings) -> None:
    """Cluster id, controller and brokers."""
    async with settings.admin() as admin:
        desc = await admin.describe_cluster()
    brokers = [
        {"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in desc.brokers
    ]
    data: dict[str, Any] = {
        "cluster_id": desc.cluster_id,
        "controller_id": desc.controller_id,
        "brokers": brokers,
    }
    if settings.json:
        print_json(data)
        return
    rows = [
        [b["id"], b["host"], b["port"], b["rack"],
         "yes" if b["id"] == desc.controller_id else ""]
        for b in brokers
    ]
    title = f"cluster [bold]{desc.cluster_id}[/]  controller {desc.controller_id}"
    out.print(table(title, ["Id", "Host", "Port", "Rack", "Controller"], rows))
