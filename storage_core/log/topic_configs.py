"""Topic configs of a log dir written without a broker: ``<log dir>/klog-topic-configs.json``.

A broker keeps topic configs in its metadata (KRaft's ``__cluster_metadata`` or ZooKeeper), not
in the log dir. A log dir that klog writes on its own (the Spark writer, ``klog`` commands, tests)
has no broker, so klog keeps the overrides of its topics in one JSON **file** in the log dir,
:data:`~storage_core.files.TOPIC_CONFIGS_FILE`. It is a file and not a directory on purpose: a broker loading the log
dir treats every directory as a partition and fails on names it cannot parse, but it ignores
files it does not know (as it ignores ``.lock`` or ``meta.properties``)::

    {
      "orders": {"cleanup.policy": "compact", "segment.bytes": "1048576"},
      "clicks": {"retention.ms": "86400000"}
    }

Values are Kafka-named topic configs, strings as in ``kafka-configs --add-config`` (numbers and
booleans are accepted too); they are validated by :class:`~storage_core.log.config.LogConfig` when
read and when written. The file is replaced atomically (temp file + fsync + rename + fsync of the
dir), so readers see the old or the new file, never a torn one.

Precedence, lowest first: Kafka's defaults (or the default config given to :class:`LogManager`),
the built-in configs of Kafka's internal topics (:data:`INTERNAL_TOPIC_CONFIGS`, which a broker
creates as compacted), this file, explicit overrides passed by the caller.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from storage_core.errors import CorruptTopicConfigsError, KlogError, LogConfigError
from storage_core.files import TMP_SUFFIX, TOPIC_CONFIGS_FILE
from storage_core.fs import as_path
from storage_core.log.config import LogConfig
from storage_core.log.topic_partition import validate_topic_name

#: Kafka's internal topics are created by the broker with ``cleanup.policy=compact``
#: (``GroupCoordinator``/``TransactionStateManager``/``ShareCoordinator`` topic configs).
INTERNAL_TOPIC_CONFIGS: Mapping[str, Mapping[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact"},
    "__transaction_state": {"cleanup.policy": "compact"},
    "__share_group_state": {"cleanup.policy": "compact"},
}

TopicConfigMap = dict[str, dict[str, str]]

__all__ = ["INTERNAL_TOPIC_CONFIGS", "CorruptTopicConfigsError", "config_for_topic",
           "load_topic_configs", "save_topic_configs", "topic_configs_path", "update_topic_configs"]


def topic_configs_path(log_dir: str | os.PathLike[str]) -> Path:
    return as_path(log_dir) / TOPIC_CONFIGS_FILE


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def load_topic_configs(log_dir: str | os.PathLike[str]) -> TopicConfigMap:
    """The overrides stored in ``log_dir``, by topic (``{}`` when there is no file)."""
    path = topic_configs_path(log_dir)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise CorruptTopicConfigsError(f"not valid JSON ({exc}); expected an object of topic -> "
                                       "{config name: value}", path=path) from exc
    if not isinstance(data, dict):
        raise CorruptTopicConfigsError(f"found a JSON {type(data).__name__}; expected an object of topic -> "
                                       "{config name: value}", path=path)
    out: TopicConfigMap = {}
    for topic, props in data.items():
        if not isinstance(props, dict):
            raise CorruptTopicConfigsError(f"topic {topic!r} maps to a JSON {type(props).__name__}; expected an "
                                           "object of config name -> value", path=path)
        rendered = {str(k): _render(v) for k, v in props.items()}
        try:
            validate_topic_name(topic)
            LogConfig.from_properties(rendered)
        except (LogConfigError, KlogError) as exc:
            raise CorruptTopicConfigsError(f"topic {topic!r}: {exc.detail}", path=path) from exc
        out[topic] = rendered
    return out


def save_topic_configs(log_dir: str | os.PathLike[str], configs: Mapping[str, Mapping[str, object]]) -> Path:
    """Replace the file with ``configs`` (validated first), atomically."""
    rendered: TopicConfigMap = {}
    for topic, props in sorted(configs.items()):
        validate_topic_name(topic)
        r = {str(k): _render(v) for k, v in sorted(props.items())}
        LogConfig.from_properties(r)  # raises LogConfigError naming the bad config
        rendered[topic] = r
    path = topic_configs_path(log_dir)
    if not path.parent.is_dir():
        raise KlogError(f"no such log directory: {path.parent}")
    tmp = path.with_name(path.name + TMP_SUFFIX)
    data = (json.dumps(rendered, indent=2, sort_keys=True) + "\n").encode("utf-8")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def update_topic_configs(log_dir: str | os.PathLike[str], topic: str, props: Mapping[str, object], *,
                         replace: bool = False) -> dict[str, str]:
    """Merge ``props`` into the stored overrides of ``topic`` (or replace them with ``replace``);
    returns the topic's overrides as stored. For writers that create topics (the Spark writer)."""
    current = load_topic_configs(log_dir)
    merged = {} if replace else dict(current.get(topic, {}))
    merged.update({str(k): _render(v) for k, v in props.items()})
    current[topic] = merged
    save_topic_configs(log_dir, current)
    return merged


def config_for_topic(topic: str, stored: Mapping[str, Mapping[str, str]], *, default: LogConfig | None = None,
                     overrides: Mapping[str, object] | None = None) -> LogConfig:
    """``default`` < internal-topic configs < ``stored[topic]`` < ``overrides``."""
    cfg = default or LogConfig()
    if topic in INTERNAL_TOPIC_CONFIGS:
        cfg = cfg.merged(INTERNAL_TOPIC_CONFIGS[topic])
    if topic in stored:
        cfg = cfg.merged(stored[topic])
    if overrides:
        cfg = cfg.merged(overrides)
    return cfg
