"""The generated codecs of the Admin's APIs, each imported on its first use.

``codecs.create_topics.CreateTopicsRequest`` imports
``aiokproto.protocol.messages.create_topics`` when ``create_topics`` is first read here
(``protocol.lazy.message_module``), so ``from aiokproto import Admin`` loads none of
them and a program pays only for the APIs it calls (tests/test_import_cost.py). Type
checkers see the real modules.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from aiokproto.protocol.lazy import message_module

if TYPE_CHECKING:
    from aiokproto.protocol.messages import alter_share_group_offsets as alter_share_group_offsets
    from aiokproto.protocol.messages import (
        alter_user_scram_credentials as alter_user_scram_credentials,
    )
    from aiokproto.protocol.messages import consumer_group_describe as consumer_group_describe
    from aiokproto.protocol.messages import (
        consumer_protocol_assignment as consumer_protocol_assignment,
    )
    from aiokproto.protocol.messages import create_acls as create_acls
    from aiokproto.protocol.messages import create_partitions as create_partitions
    from aiokproto.protocol.messages import create_topics as create_topics
    from aiokproto.protocol.messages import delete_acls as delete_acls
    from aiokproto.protocol.messages import delete_groups as delete_groups
    from aiokproto.protocol.messages import delete_records as delete_records
    from aiokproto.protocol.messages import delete_share_group_offsets as delete_share_group_offsets
    from aiokproto.protocol.messages import delete_topics as delete_topics
    from aiokproto.protocol.messages import describe_acls as describe_acls
    from aiokproto.protocol.messages import describe_cluster as describe_cluster
    from aiokproto.protocol.messages import describe_configs as describe_configs
    from aiokproto.protocol.messages import describe_groups as describe_groups
    from aiokproto.protocol.messages import describe_log_dirs as describe_log_dirs
    from aiokproto.protocol.messages import (
        describe_share_group_offsets as describe_share_group_offsets,
    )
    from aiokproto.protocol.messages import describe_topic_partitions as describe_topic_partitions
    from aiokproto.protocol.messages import (
        describe_user_scram_credentials as describe_user_scram_credentials,
    )
    from aiokproto.protocol.messages import elect_leaders as elect_leaders
    from aiokproto.protocol.messages import incremental_alter_configs as incremental_alter_configs
    from aiokproto.protocol.messages import list_groups as list_groups
    from aiokproto.protocol.messages import list_offsets as list_offsets
    from aiokproto.protocol.messages import offset_commit as offset_commit
    from aiokproto.protocol.messages import offset_delete as offset_delete
    from aiokproto.protocol.messages import offset_fetch as offset_fetch
    from aiokproto.protocol.messages import share_group_describe as share_group_describe


def __getattr__(name: str) -> ModuleType:
    """The module ``name``, lazily, kept here so later reads skip this call."""
    if name.startswith("__"):  # copy, pickle and friends probe for dunders
        raise AttributeError(name)
    try:
        module = message_module(name)
    except ImportError as exc:  # hasattr() and getattr(..., default) expect this
        raise AttributeError(f"no generated codec {name!r}", name=name) from exc
    globals()[name] = module
    return module
