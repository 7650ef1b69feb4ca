"""The package face: ``storage_core.__all__`` holds every public exception, so that a user catches
any of them as ``storage_core.<Name>`` (docs/errors.md lists them)."""

from __future__ import annotations

import importlib
import pkgutil

import storage_core
from storage_core.errors import KlogError


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


def test_every_klog_error_is_exported() -> None:
    for info in pkgutil.walk_packages(storage_core.__path__, "storage_core."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)  # every module that may define an error
    errors = {c for c in _subclasses(KlogError) | {KlogError} if c.__module__.startswith("storage_core.")}
    assert len(errors) >= 25
    missing = sorted(c.__name__ for c in errors if c.__name__ not in storage_core.__all__)
    assert not missing, f"KlogError subclasses missing from storage_core.__all__: {missing}"
    for c in errors:
        assert getattr(storage_core, c.__name__) is c


def test_all_names_resolve() -> None:
    for name in storage_core.__all__:
        assert getattr(storage_core, name) is not None, name
