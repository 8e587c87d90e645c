"""Share group helpers: the group's configs (start at earliest, short locks)."""

from __future__ import annotations

from aiokproto.admin import Admin, AlterConfigOp, ConfigResource, ConfigResourceType


async def configure_share_group(
    bootstrap: str,
    group: str,
    *,
    earliest: bool = True,
    lock_ms: int | None = None,
    delivery_limit: int | None = None,
    heartbeat_ms: int | None = 500,
    session_ms: int | None = None,
) -> None:
    """A new share group starts at the latest offset unless told otherwise; the lock
    duration floor is 1 s on the test broker (the harness lowers it)."""
    ops = []
    if earliest:
        ops.append(AlterConfigOp("share.auto.offset.reset", "earliest"))
    for name, value in (
        ("share.record.lock.duration.ms", lock_ms),
        ("share.delivery.count.limit", delivery_limit),
        ("share.heartbeat.interval.ms", heartbeat_ms),
        ("share.session.timeout.ms", session_ms),
    ):
        if value is not None:
            ops.append(AlterConfigOp(name, str(value)))
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.incremental_alter_configs(
            {ConfigResource(ConfigResourceType.GROUP, group): ops}
        )
