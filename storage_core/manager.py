"""Log directories: finding the partitions in one or more log dirs (``LogManager``, first part).

A log dir holds one directory per partition, named ``<topic>-<partition>`` (the *last* ``-``
splits it), plus the checkpoint files. Directories being deleted (``.<uuid>-delete``), moved
(``-future``) or left over (``-stray``) are skipped, as is anything that is not a partition
(``__cluster_metadata-0`` is a partition too: KRaft's metadata log). A path that is itself a
partition directory (it holds ``.log`` files) is accepted as well.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .errors import InvalidTopicError, KlogError
from .topic_partition import TopicPartition

_SKIPPED_SUFFIXES = ("-delete", "-future", "-stray")


@dataclass(frozen=True, slots=True)
class PartitionDir:
    topic_partition: TopicPartition
    path: Path
    log_dir: Path


def _is_partition_dir(path: Path) -> bool:
    return any(n.endswith(".log") for n in os.listdir(path))


def find_partitions(paths: Iterable[str | os.PathLike[str]]) -> list[PartitionDir]:
    """Every partition under the given log dirs (or partition dirs), sorted by topic and partition."""
    out: dict[TopicPartition, PartitionDir] = {}
    for raw in paths:
        root = Path(raw)
        if not root.exists():
            raise KlogError(f"no such log directory: {root}")
        if not root.is_dir():
            raise KlogError(f"not a directory: {root}; expected a Kafka log dir or a <topic>-<partition> dir")
        candidates = [root] if _is_partition_dir(root) else sorted(p for p in root.iterdir() if p.is_dir())
        for d in candidates:
            if d.name.endswith(_SKIPPED_SUFFIXES):
                continue
            try:
                tp = TopicPartition.parse_dir_name(d.name)
            except InvalidTopicError:
                if d == root:
                    raise
                continue  # not a partition directory (e.g. a stray folder in the log dir)
            if tp in out:
                raise KlogError(f"partition {tp} is in two log dirs: {out[tp].path} and {d}")
            out[tp] = PartitionDir(tp, d, d.parent)
    return [out[k] for k in sorted(out)]
