"""The compiled record codec (aiokproto/_accel.c) is optional: without a C compiler the
build skips it and aiokproto runs as pure Python (aiokproto/accel.py says which is in
use). So is the Spark source's Arrow builder (aiokproto/spark/_arrow.c, used only with
the spark extra; aiokproto/spark/arrow.py falls back to Python without it). Everything
else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "aiokproto._accel",
            sources=["aiokproto/_accel.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "aiokproto.spark._arrow",
            sources=["aiokproto/spark/_arrow.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
