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

**Precedence** of a topic's config, lowest first; :func:`resolve_topic_config` is the one place
that applies it (retention, compaction, ``klog describe``, the Spark writer all go through it):

1. Kafka's defaults (``LogConfig``), or the default config a caller gives :class:`LogManager`;
2. the built-in configs of Kafka's internal topics (:data:`INTERNAL_TOPIC_CONFIGS`, which a
   broker creates as compacted);
3. KRaft cluster defaults: the dynamic broker configs of the log dir's ``__cluster_metadata``
   (``kafka-configs --entity-type brokers --entity-default``), broker names turned into topic
   configs by Kafka's synonym table (``log.retention.ms`` > ``log.retention.minutes`` >
   ``log.retention.hours`` for ``retention.ms``); then the dynamic configs of the broker that owns
   the dir (``node.id`` of its ``meta.properties``), as a broker ranks its own over the default;
4. KRaft topic configs: what ``kafka-configs --entity-type topics`` (or topic creation) recorded
   for the topic (:mod:`storage_core.log.cluster_metadata`);
5. this file: what klog itself was told for this dir (by ``update_topic_configs``, the Spark
   writer's config options), so it is the newer word than a broker's metadata it was copied with;
6. explicit overrides the caller passes (``klog retention --config``, ``LogManager(overrides=)``,
   a write's options): the caller's word for this run wins over everything stored.

Steps 1-4 are Kafka's own order (``DYNAMIC_TOPIC_CONFIG`` > ``DYNAMIC_BROKER_CONFIG`` >
``DYNAMIC_DEFAULT_BROKER_CONFIG`` > ``DEFAULT_CONFIG``) with the internal topics' built-ins
where a broker puts them, in the topic's creation configs. A broker's static configs
(``server.properties``: ``log.retention.hours=...`` set there) are not in a log dir and cannot be
known: where they differed from Kafka's defaults, klog's figures differ too. A ZooKeeper-era dir
has no ``__cluster_metadata``: its topic configs were in ZooKeeper, so steps 3-4 are empty and
Kafka's defaults are assumed. ``__cluster_metadata`` itself takes no KRaft layer: a broker
configures the metadata log with its ``metadata.log.*`` configs, not with topic configs. KRaft
configs klog does not know (``message.timestamp.difference.max.ms``
of Kafka 3, vendor configs) or whose value it rejects are left out and listed, never guessed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from storage_core.errors import CorruptTopicConfigsError, KlogError, LogConfigError
from storage_core.files import TMP_SUFFIX, TOPIC_CONFIGS_FILE
from storage_core.fs import as_path
from storage_core.log.cluster_metadata import CLUSTER_METADATA_TOPIC, ClusterMetadata
from storage_core.log.config import CONFIG_KEYS, REMOVED_CONFIGS, LogConfig
from storage_core.log.topic_partition import validate_topic_name

#: Kafka's internal topics are created by the broker with ``cleanup.policy=compact``
#: (``GroupCoordinator``/``TransactionStateManager``/``ShareCoordinator`` topic configs).
INTERNAL_TOPIC_CONFIGS: Mapping[str, Mapping[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact"},
    "__transaction_state": {"cleanup.policy": "compact"},
    "__share_group_state": {"cleanup.policy": "compact"},
}

TopicConfigMap = dict[str, dict[str, str]]

#: Where a config's value came from (:attr:`ResolvedConfig.sources`), lowest precedence first.
SOURCE_DEFAULT = "default"  # a default config the caller gave, where it differs from Kafka's
SOURCE_INTERNAL = "internal"
SOURCE_KRAFT_DEFAULT = "kraft cluster default"
SOURCE_KRAFT_BROKER = "kraft broker"
SOURCE_KRAFT_TOPIC = "kraft topic"
SOURCE_FILE = "klog-topic-configs.json"
SOURCE_EXPLICIT = "explicit"

__all__ = ["INTERNAL_TOPIC_CONFIGS", "CorruptTopicConfigsError", "ResolvedConfig", "config_for_topic",
           "load_topic_configs", "resolve_topic_config", "save_topic_configs", "topic_configs_path",
           "update_topic_configs"]


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


@dataclass(frozen=True)
class ResolvedConfig:
    """A topic's config and where each of its set values came from."""

    config: LogConfig
    #: Config name -> the layer that set it last (``SOURCE_*``), for every config a layer above
    #: Kafka's defaults set (even to the default's value); configs not listed are Kafka's defaults.
    sources: Mapping[str, str]
    #: KRaft configs that could not be applied: ``name=value (why)``.
    ignored: tuple[str, ...] = ()

    def set_values(self) -> dict[str, str]:
        """Each config set above Kafka's defaults, by name, as Kafka's string (what
        ``klog-topic-configs.json`` holds): the topic's config in a file of its own."""
        return {name: CONFIG_KEYS[name].render(self.config.get(name)) for name in sorted(self.sources)
                if self.sources[name] != SOURCE_DEFAULT}

    def described(self) -> list[str]:
        """``name=value (source)`` for each config set above Kafka's defaults, by name."""
        out = []
        for name in sorted(self.sources):
            out.append(f"{name}={CONFIG_KEYS[name].render(self.config.get(name))} ({self.sources[name]})")
        return out


def _kraft_layer(cfg: LogConfig, props: Mapping[str, str], source: str, sources: dict[str, str],
                 ignored: list[str]) -> LogConfig:
    """``props`` of a KRaft layer applied on ``cfg``: a name klog does not know or a value it
    rejects is left out (and listed), not an error: the broker accepted it, klog cannot use it."""
    usable: dict[str, str] = {}
    for name, value in props.items():
        key = CONFIG_KEYS.get(name)
        if key is None:
            why = REMOVED_CONFIGS.get(name, "not a topic config klog knows")
            ignored.append(f"{name}={value} ({source}: {why})")
            continue
        try:
            key.coerce(value)
        except LogConfigError as exc:
            ignored.append(f"{name}={value} ({source}: {exc.detail})")
            continue
        usable[name] = value
    if not usable:
        return cfg
    try:
        merged = cfg.merged(usable)
    except LogConfigError as exc:  # values that conflict with each other (min > max compaction lag)
        ignored.extend(f"{n}={v} ({source}: {exc.detail})" for n, v in usable.items())
        return cfg
    sources.update(dict.fromkeys(usable, source))
    return merged


def resolve_topic_config(topic: str, stored: Mapping[str, Mapping[str, str]], *, default: LogConfig | None = None,
                         kraft: ClusterMetadata | None = None,
                         overrides: Mapping[str, object] | None = None) -> ResolvedConfig:
    """The config of ``topic`` by the module's precedence: ``default`` (Kafka's) < internal-topic
    configs < KRaft cluster defaults < the dir's broker's KRaft configs < KRaft topic configs <
    ``stored[topic]`` (``klog-topic-configs.json``) < ``overrides``; and the source of each value."""
    cfg = default or LogConfig()
    sources: dict[str, str] = dict.fromkeys(cfg.to_properties(), SOURCE_DEFAULT)
    ignored: list[str] = []
    if topic in INTERNAL_TOPIC_CONFIGS:
        cfg = cfg.merged(INTERNAL_TOPIC_CONFIGS[topic])
        sources.update(dict.fromkeys(INTERNAL_TOPIC_CONFIGS[topic], SOURCE_INTERNAL))
    if kraft is not None and topic != CLUSTER_METADATA_TOPIC:  # the metadata log has its own metadata.log.* configs
        cluster, own, problems = kraft.topic_defaults()
        ignored.extend(f"{p} ({SOURCE_KRAFT_DEFAULT})" for p in problems)
        cfg = _kraft_layer(cfg, cluster, SOURCE_KRAFT_DEFAULT, sources, ignored)
        cfg = _kraft_layer(cfg, own, SOURCE_KRAFT_BROKER, sources, ignored)
        cfg = _kraft_layer(cfg, kraft.topic_configs.get(topic, {}), SOURCE_KRAFT_TOPIC, sources, ignored)
    if topic in stored:
        cfg = cfg.merged(stored[topic])
        sources.update(dict.fromkeys(stored[topic], SOURCE_FILE))
    if overrides:
        cfg = cfg.merged(overrides)
        sources.update(dict.fromkeys(overrides, SOURCE_EXPLICIT))
    return ResolvedConfig(cfg, MappingProxyType(sources), tuple(ignored))


def config_for_topic(topic: str, stored: Mapping[str, Mapping[str, str]], *, default: LogConfig | None = None,
                     kraft: ClusterMetadata | None = None,
                     overrides: Mapping[str, object] | None = None) -> LogConfig:
    """The config of ``topic``: :func:`resolve_topic_config`'s, without the sources."""
    return resolve_topic_config(topic, stored, default=default, kraft=kraft, overrides=overrides).config
