"""Loading the native kernel (``storage_core.record._kernel``, built from ``_kernel_src/``) or saying why not.

One place decides whether klog runs its C kernel or the pure-Python twins: the columnar
builders and encoders (:mod:`storage_core.record.columnar`), the read_committed filter
(:mod:`storage_core.record.txn_filter`) and the log cleaner's offset map
(:mod:`storage_core.cleaner.offset_map`) all ask :func:`native_kernel`.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

__all__ = ["native_kernel"]

_KERNEL_WARNED = False


def native_kernel() -> Any | None:
    """The native kernel module, or None (with a one-time warning) where it is not built.

    ``KLOG_PURE_PYTHON=1`` forces the pure-Python path.
    """
    global _KERNEL_WARNED
    if os.environ.get("KLOG_PURE_PYTHON") == "1":
        return None
    try:
        from storage_core.record import _kernel
    except ImportError as exc:
        if not _KERNEL_WARNED:
            _KERNEL_WARNED = True
            warnings.warn(f"klog's native kernel is unavailable ({exc}); using the pure-Python decoder, "
                          "which is much slower. Reinstall with a C compiler to build it.",
                          RuntimeWarning, stacklevel=2)
        return None
    return _kernel
