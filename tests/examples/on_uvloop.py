"""Run a script as ``__main__`` with uvloop's policy installed: ``python -m
tests.examples.on_uvloop SCRIPT [ARGS...]`` (what an app under ``uvicorn[standard]`` gets)."""

from __future__ import annotations

import asyncio
import runpy
import sys

import uvloop

if __name__ == "__main__":
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
