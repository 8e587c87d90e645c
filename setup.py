"""The compiled record codec (aiokproto/_accel.c) is optional: without a C compiler the
build skips it and aiokproto runs as pure Python (aiokproto/accel.py says which is in
use). Everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "aiokproto._accel",
            sources=["aiokproto/_accel.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
