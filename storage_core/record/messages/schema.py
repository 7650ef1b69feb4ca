"""The shape of Kafka's message definitions (the JSON files of ``*/src/main/resources/common/message``),
as data: a :class:`MessageSpec` is a message's name, apiKey, valid and flexible versions and its
fields; a :class:`FieldSpec` is one field with the versions it is present, nullable and tagged in.

The tables of the families (``coordinator``, ``metadata``, ``raft``) are written with :func:`F`
and :func:`message` from Kafka's definitions; :mod:`storage_core.record.messages.codec` interprets
them. Nothing here parses bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any


@dataclass(frozen=True)
class Versions:
    """A version range of Kafka's definitions: ``"0+"``, ``"3"``, ``"1-4"`` or ``"none"``."""

    low: int  # first version (inclusive)
    high: int | None  # last version (inclusive); None: no upper bound ("N+")
    empty: bool = False  # "none"

    @staticmethod
    def parse(text: str) -> Versions:
        t = text.strip()
        if t == "none":
            return Versions(0, -1, empty=True)
        if t.endswith("+"):
            return Versions(int(t[:-1]), None)
        if "-" in t:
            lo, hi = t.split("-", 1)
            return Versions(int(lo), int(hi))
        return Versions(int(t), int(t))

    def contains(self, version: int) -> bool:
        if self.empty:
            return False
        return version >= self.low and (self.high is None or version <= self.high)

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high is None:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


class Kind(Enum):
    """What a field's ``type`` names."""

    PRIMITIVE = "primitive"  # int8 .. float64, bool, uuid, string, bytes
    STRUCT = "struct"  # a nested struct (``"type": "Endpoint"`` with ``fields``)
    ARRAY = "array"  # ``[]int32``, ``[]string``, ``[]uuid``
    STRUCT_ARRAY = "struct_array"  # ``[]TopicPartition`` with ``fields``


#: The primitive types of Kafka's message generator (``FieldType.java``).
PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "uuid", "string", "bytes"}
)

_FIRST_UPPER = re.compile(r"^[A-Z]")


@dataclass(frozen=True)
class FieldSpec:
    """One field of a message or struct, as in Kafka's JSON definitions."""

    name: str  # the name as defined ("TopicId", "offset"); JSON output uses json_name
    type: str  # "int32", "string", "[]int32", "[]TopicPartition", "Endpoint"
    versions: Versions  # versions the field is present in
    nullable: Versions  # versions in which it may be null
    tagged: Versions  # versions in which it is a tagged field ("none" for a regular field)
    tag: int | None  # its tag, when tagged
    default: Any  # the default (Python value); what a tagged field is when absent
    fields: tuple[FieldSpec, ...]  # the struct's fields (struct and struct-array types)
    about: str  # Kafka's "about"

    @property
    def kind(self) -> Kind:
        if self.type.startswith("[]"):
            return Kind.STRUCT_ARRAY if self.fields else Kind.ARRAY
        return Kind.STRUCT if self.fields else Kind.PRIMITIVE

    @property
    def element(self) -> str:
        """The element type of an array (``"int32"`` for ``[]int32``)."""
        return self.type[2:] if self.type.startswith("[]") else self.type

    @property
    def json_name(self) -> str:
        """The name Kafka's generated JsonConverter writes: the field name with its first letter
        lower-cased (``MessageGenerator.lowerCaseFirst``: ``TopicId`` -> ``topicId``)."""
        return self.name[0].lower() + self.name[1:] if _FIRST_UPPER.match(self.name) else self.name


def F(  # noqa: N802 - the tables read like Kafka's JSON
    name: str,
    type: str,  # noqa: A002
    versions: str = "0+",
    *,
    nullable: str = "none",
    tagged: str = "none",
    tag: int | None = None,
    default: Any = None,
    fields: tuple[FieldSpec, ...] = (),
    about: str = "",
) -> FieldSpec:
    """A field as Kafka's JSON spells it: ``F("TopicId", "uuid", "0+", about=...)``."""
    element = type[2:] if type.startswith("[]") else type
    if not fields and element not in PRIMITIVES:
        raise ValueError(f"field {name}: type {type} is neither primitive nor given fields")
    if (tag is None) != (tagged == "none"):
        raise ValueError(f"field {name}: tag and taggedVersions go together")
    return FieldSpec(name, type, Versions.parse(versions), Versions.parse(nullable), Versions.parse(tagged), tag,
                     default, fields, about)


@dataclass(frozen=True)
class MessageSpec:
    """One message definition (a JSON file of Kafka's)."""

    name: str  # "OffsetCommitValue"
    api_key: int | None  # the record type (coordinator records, metadata records); None for plain data
    valid: Versions  # validVersions
    flexible: Versions  # flexibleVersions: compact encodings and tagged fields from here
    fields: tuple[FieldSpec, ...]
    source: str  # the definition's path in apache/kafka
    notes: str = ""  # what klog knows about the table's provenance

    @property
    def highest(self) -> int:
        assert self.valid.high is not None, f"{self.name}: validVersions must be bounded"
        return self.valid.high


def message(name: str, api_key: int | None, valid: str, flexible: str, fields: tuple[FieldSpec, ...], *,
            source: str, notes: str = "") -> MessageSpec:
    """A message as Kafka's JSON spells it."""
    return MessageSpec(name, api_key, Versions.parse(valid), Versions.parse(flexible), fields, source, notes)
