"""The Admin client and the types its methods take and return: plumbing in a base
(``base.py``), one mixin module per area, ``_batch.py`` the per-item retry loop."""

from aiokproto.admin import types
from aiokproto.admin.batch_error import AdminBatchError
from aiokproto.admin.client import Admin
from aiokproto.admin.types import *  # noqa: F403 - every name types.py exports

__all__ = ["Admin", "AdminBatchError"]
__all__ += types.__all__
