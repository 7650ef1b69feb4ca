"""Topic names and partition directory names (``Topic.java``, ``TopicPartition.java``, ``LocalLog.scala``).

A topic name is legal when (``Topic.validate``, checked in this order)::

    rule        Kafka's condition
    empty       name is not ""
    dots        name is not "." and not ".."
    length      len(name) <= 249                      (MAX_TOPIC_NAME_LENGTH)
    charset     every char in [a-zA-Z0-9._-]          (LEGAL_TOPIC_CHARS; so no '/', '\\', NUL, space)

A partition's directory in a log dir (``LocalLog.logDirName`` / ``parseTopicPartitionName``)::

    <topic>-<partition>                     a live partition, e.g. my-topic-12, __consumer_offsets-49
    <topic>-<partition>.<uuid>-delete       marked for deletion (the topic may be cut so the name fits 255)
    <topic>-<partition>.<uuid>-future       target of an alter-log-dirs move
    <topic>-<partition>.<uuid>-stray        a stray partition (KIP-858)

Parsing strips ``.<uuid><suffix>`` at the last '.', then splits at the **last** '-' (topics may
contain '-' and '.'). Kafka's ``String.toInt`` would also take ``+5`` or ``01`` for the partition;
klog wants plain ASCII digits without a leading zero (as every broker names them), so that ``parse_dir_name(tp.dir_name)`` always gives ``tp`` back, and checks
the topic with :func:`validate_topic_name` as well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from storage_core.errors import InvalidTopicError
from storage_core.files import MARKED_DIR_SUFFIXES
from storage_core.limits import INT32_MAX

__all__ = [
    "GROUP_OFFSETS_TOPIC",
    "INTERNAL_TOPICS",
    "LEGAL_TOPIC_CHARS",
    "MAX_PARTITION",
    "MAX_TOPIC_NAME_LENGTH",
    "TopicPartition",
    "check_appendable",
    "validate_topic_name",
]

# --- Topic.java -------------------------------------------------------------------------------

#: Kafka's ``Topic.LEGAL_CHARS`` (a regex character class).
LEGAL_TOPIC_CHARS = "[a-zA-Z0-9._-]"
#: Kafka's ``Topic.MAX_NAME_LENGTH``: 255 (a file name) minus room for ``-<partition>`` and suffixes.
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(LEGAL_TOPIC_CHARS + "+", re.ASCII)

#: Partitions are Java ints and never negative.
MAX_PARTITION = INT32_MAX

# --- LocalLog.scala ---------------------------------------------------------------------------

#: ``DeleteDirPattern`` / ``FutureDirPattern`` / ``StrayDirPattern``: ``^(\S+)-(\S+)\.(\S+)<suffix>``,
#: with Java's ASCII ``\S``.
_SUFFIX_DIR_PATTERNS = {suffix: re.compile(r"(\S+)-(\S+)\.(\S+)" + re.escape(suffix), re.ASCII) for suffix in MARKED_DIR_SUFFIXES}
_PARTITION_DIGITS = re.compile(r"[0-9]+", re.ASCII)

_DIR_FORM = "<topic>-<partition> or <topic>-<partition>.<uuid>-delete (or -future, -stray)"


#: Topics a broker refuses produce requests to (``Topic.isInternal``: ``ReplicaManager`` answers
#: ``InvalidTopicException``), plus the KRaft metadata log and the tiered storage metadata topic,
#: which only the controller and the broker's own managers write.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state",
                             "__cluster_metadata", "__remote_log_metadata"})


#: The one internal topic klog appends to, and only the group coordinator's records restored into it by
#: :func:`storage_core.tools.restore_groups.restore_groups` (OffsetCommit and group metadata records,
#: encoded as the coordinator encodes them, into a stopped broker's dir, under its lock).
GROUP_OFFSETS_TOPIC = "__consumer_offsets"


def check_appendable(topic: str, *, group_records: bool = False) -> None:
    """Raise :class:`InvalidTopicError` for an internal topic, which klog's writers refuse before any
    task runs, as a broker refuses a producer's append: its records are the coordinators' and the
    controller's own, in their formats (a record of another shape makes them fail to load).

    ``group_records``: the caller writes group coordinator records into ``__consumer_offsets`` (the
    restore of consumer groups, and nothing else); every other internal topic is refused still."""
    if topic in INTERNAL_TOPICS and not (group_records and topic == GROUP_OFFSETS_TOPIC):
        raise InvalidTopicError(f"Cannot append to internal topic {topic!r}: only Kafka's own coordinators and "
                                "controller write it (a broker refuses produce requests to it with "
                                "InvalidTopicException); expected a topic of your own"
                                + ("" if topic == GROUP_OFFSETS_TOPIC else
                                   " (klog restores consumer groups into __consumer_offsets only)"))


def validate_topic_name(name: str) -> None:
    """Raise :class:`InvalidTopicError` unless Kafka's ``Topic.validate`` accepts ``name``.

    The message names the bad name and the rule it breaks.
    """
    if not isinstance(name, str):
        raise InvalidTopicError(f"Topic name must be a string, got {type(name).__name__} {name!r}")
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f'Topic name {name!r} is illegal, it cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name {_short(name)} is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
            f" (it has {len(name)})"
        )
    if _LEGAL_TOPIC.fullmatch(name) is None:
        bad = next(c for c in name if _LEGAL_TOPIC.fullmatch(c) is None)
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than ASCII alphanumerics, '.', '_'"
            f" and '-' (first bad character: {bad!r})"
        )


def _short(name: str) -> str:
    return repr(name) if len(name) <= 60 else repr(name[:40] + "...")


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """One partition of one topic; ordered by topic, then partition.

    Like Kafka's ``TopicPartition`` the constructor does not validate: use
    :func:`validate_topic_name`, or :meth:`parse_dir_name` for directory names.
    """

    topic: str
    partition: int

    @property
    def dir_name(self) -> str:
        """The partition's directory name in a log dir: ``<topic>-<partition>``."""
        return f"{self.topic}-{self.partition}"

    def __str__(self) -> str:
        return self.dir_name

    @classmethod
    def parse_dir_name(cls, name: str) -> TopicPartition:
        """The topic-partition a log-dir child directory belongs to, as ``LocalLog.parseTopicPartitionName``.

        Accepts ``<topic>-<partition>`` and the ``.<uuid>-delete`` / ``-future`` / ``-stray``
        forms; raises :class:`InvalidTopicError` naming the directory for anything else.
        """
        if not name or "-" not in name:
            raise _not_a_partition_dir(name, "it has no '-'")
        base = name
        for suffix in MARKED_DIR_SUFFIXES:
            if name.endswith(suffix):
                if _SUFFIX_DIR_PATTERNS[suffix].fullmatch(name) is None:
                    raise _not_a_partition_dir(name, f"it ends in {suffix!r} but not in '.<uuid>{suffix}'")
                base = name[: name.rindex(".")]
                break
        index = base.rindex("-") if "-" in base else -1
        topic, partition_text = base[:index], base[index + 1 :]
        if index < 0 or not topic:
            raise _not_a_partition_dir(name, "the topic before the last '-' is empty")
        if not partition_text:
            raise _not_a_partition_dir(name, "the partition after the last '-' is empty")
        if _PARTITION_DIGITS.fullmatch(partition_text) is None:
            raise _not_a_partition_dir(name, f"the partition {partition_text!r} is not a non-negative integer")
        if len(partition_text) > 1 and partition_text.startswith("0"):
            raise _not_a_partition_dir(name, f"the partition {partition_text!r} has a leading zero, which no broker "
                                             f"writes (Kafka names partition {int(partition_text)} "
                                             f"{base[:index]}-{int(partition_text)})")
        partition = int(partition_text)
        if partition > MAX_PARTITION:
            raise _not_a_partition_dir(name, f"the partition {partition_text} is larger than {MAX_PARTITION}")
        try:
            validate_topic_name(topic)
        except InvalidTopicError as e:
            raise InvalidTopicError(f"Directory name {name!r} is not a partition directory: {e.detail}") from None
        return cls(topic, partition)


def _not_a_partition_dir(name: str, why: str) -> InvalidTopicError:
    return InvalidTopicError(f"Directory name {name!r} is not in the form {_DIR_FORM}: {why}")
