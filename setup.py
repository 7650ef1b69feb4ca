"""Builds the optional native kernel (storage_core.record._kernel) with the machine's C compiler.

Everything else is declared in pyproject.toml. If the kernel cannot be compiled, the install
still succeeds and klog uses its pure-Python path (with a one-time warning).
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any compiler failure means: no kernel
            if os.environ.get("KLOG_REQUIRE_KERNEL"):
                raise
            print(f"klog: native kernel not built ({exc}); the pure-Python path will be used", file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            if os.environ.get("KLOG_REQUIRE_KERNEL"):
                raise
            print(f"klog: native kernel not built ({exc}); the pure-Python path will be used", file=sys.stderr)


#: The kernel's units (kernel.h says what each owns), compiled into one extension module.
KERNEL_SRC = "storage_core/record/_kernel_src"
KERNEL_UNITS = ["module", "buf", "crc32c", "lz4", "decode", "txn_filter", "encode", "md5", "cleaner"]

cflags = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]
if os.environ.get("KLOG_ASAN"):
    cflags += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-O1", "-g"]

setup(
    ext_modules=[
        Extension(
            "storage_core.record._kernel",
            sources=[f"{KERNEL_SRC}/{unit}.c" for unit in KERNEL_UNITS],
            depends=[f"{KERNEL_SRC}/kernel.h", f"{KERNEL_SRC}/record.h"],
            extra_compile_args=cflags,
            extra_link_args=["-fsanitize=address,undefined"] if os.environ.get("KLOG_ASAN") else [],
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
