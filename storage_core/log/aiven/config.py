"""The plugin's configuration as a reader needs it: the ``rsm.config.*`` settings of a broker.

Kafka passes every broker property that starts with ``rsm.config.`` to the
``RemoteStorageManager``, prefix stripped (``RemoteLogManagerConfig``). The names and defaults below
are the plugin's (``core/src/main/java/io/aiven/kafka/tieredstorage/config/RemoteStorageManagerConfig.java``
and ``docs/configs.rst`` at v1.1.1); the storage backends' own
(``storage/filesystem/.../FileSystemStorageConfig.java``: ``storage.root``;
``storage/s3/.../S3StorageConfig.java``: ``s3.bucket.name``) say where the objects are when the read
gives no ``remoteStorage``. Only what reading needs is kept: the key prefix, the key ring and the
storage location. What the manifest records per segment (chunk size, compression, the data key's
pair) wins over the settings, as in the plugin's fetch path; the settings written at upload time
need not match today's.

A :class:`AivenConfig` never shows a key: the key files are named by path, read only when a
segment's data key is unwrapped (:mod:`storage_core.log.aiven.transform`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from storage_core.errors import InvalidOptionError, KlogError

__all__ = ["RSM_CONFIG_PREFIX", "AivenConfig", "KeyPairPaths"]

#: Kafka's prefix of the RemoteStorageManager's settings in ``server.properties``
#: (``RemoteLogManagerConfig.REMOTE_STORAGE_MANAGER_CONFIG_PREFIX_PROP`` default).
RSM_CONFIG_PREFIX = "rsm.config."
#: ``RemoteStorageManagerConfig``: names of the settings a reader uses.
KEY_PREFIX = "key.prefix"
KEY_PREFIX_MASK = "key.prefix.mask"
ENCRYPTION_ENABLED = "encryption.enabled"
ENCRYPTION_KEY_PAIRS = "encryption.key.pairs"
ENCRYPTION_KEY_PAIR_ID = "encryption.key.pair.id"
#: ``encryption.key.pairs.<id>.public.key.file`` / ``.private.key.file`` (``KeyPairPaths``)
KEY_PAIR_PREFIX = "encryption.key.pairs."
PUBLIC_KEY_FILE = ".public.key.file"
PRIVATE_KEY_FILE = ".private.key.file"
STORAGE_BACKEND_CLASS = "storage.backend.class"
#: ``FileSystemStorageConfig``: the root dir of the objects
STORAGE_ROOT = "storage.root"
#: ``S3StorageConfig``: the bucket (``s3.endpoint.url``, ``s3.region`` go to the ``fs.*`` options)
S3_BUCKET_NAME = "s3.bucket.name"
FILESYSTEM_BACKEND = "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage"
S3_BACKEND = "io.aiven.kafka.tieredstorage.storage.s3.S3Storage"


@dataclass(frozen=True)
class KeyPairPaths:
    """One key pair of the ring (``KeyPairPaths.java``): the PEM files, by path (never their bytes)."""

    key_pair_id: str
    public_key_file: str | None
    private_key_file: str | None


@dataclass(frozen=True)
class AivenConfig:
    """The ``rsm.config.*`` settings a read of the plugin's objects uses (picklable: strings only).

    ``settings`` are the plugin's names without the ``rsm.config.`` prefix: the properties file's
    (``remoteStorageConfig``), then the read's ``rsm.config.*`` options over them.
    """

    settings: Mapping[str, str] = field(default_factory=dict)
    #: where the settings came from (a file path; for messages)
    source: str | None = None

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None, overrides: Mapping[str, str] | None = None) -> AivenConfig:
        """The settings of a properties file (a broker's ``server.properties`` works as it is: only
        ``rsm.config.*`` keys count) with ``overrides`` (``rsm.config.*`` keys) over them; an
        :class:`InvalidOptionError` naming the file when it cannot be read."""
        from storage_core.log.checkpoint import MetaProperties

        settings: dict[str, str] = {}
        if path is not None:
            p = Path(os.fspath(path))
            if not p.is_file():
                raise InvalidOptionError(f"remoteStorageConfig={str(path)!r} is not a file; expected a properties file "
                                         "holding the plugin's rsm.config.* settings (a broker's server.properties)")
            try:
                props = MetaProperties(p).read(missing_ok=False)  # java.util.Properties, as the broker reads it
            except KlogError as exc:
                raise InvalidOptionError(f"remoteStorageConfig={str(path)!r} is not a properties file: {exc}") from None
            settings.update(_stripped(props))
        settings.update(_stripped(overrides or {}))
        return cls(settings, None if path is None else os.fspath(path))

    def get(self, name: str, default: str | None = None) -> str | None:
        value = self.settings.get(name)
        return default if value is None else value.strip()

    @property
    def key_prefix(self) -> str:
        """``key.prefix`` (default empty): put before every object key (``ObjectKeyFactory``)."""
        return self.get(KEY_PREFIX, "") or ""

    @property
    def key_prefix_mask(self) -> bool:
        """``key.prefix.mask``: the plugin hides the prefix in its logs; so do klog's messages."""
        return (self.get(KEY_PREFIX_MASK, "false") or "false").lower() == "true"

    def shown_key(self, key: str) -> str:
        """``key`` as a message shows it: with ``key.prefix.mask`` (the plugin then keeps the prefix
        out of its logs, ``RemoteStorageManagerConfig``), the prefix as ``<prefix>/``."""
        prefix = self.key_prefix
        if self.key_prefix_mask and prefix and key.startswith(prefix):
            return "<prefix>/" + key[len(prefix):]
        return key

    def key_pair(self, key_pair_id: str) -> KeyPairPaths | None:
        """The ring's pair ``key_pair_id`` (``encryption.key.pairs`` lists the ids); None if the ring
        does not name it. Its key files are looked up by the id as spelled, and then regardless of
        case: Spark hands a data source its option keys lowercased
        (``rsm.config.encryption.key.pairs.K2.private.key.file`` arrives as ``...pairs.k2...``)."""
        ids = [i.strip() for i in (self.get(ENCRYPTION_KEY_PAIRS, "") or "").split(",") if i.strip()]
        base = KEY_PAIR_PREFIX + key_pair_id
        public, private = self._key_file(base + PUBLIC_KEY_FILE), self._key_file(base + PRIVATE_KEY_FILE)
        if key_pair_id not in ids and public is None and private is None:
            return None
        return KeyPairPaths(key_pair_id, public, private)

    def _key_file(self, name: str) -> str | None:
        """The setting ``name``, or the one setting named so regardless of case; two such settings
        (ids that differ only in case, given lowercased) are an :class:`InvalidOptionError`."""
        value = self.get(name)
        if value is not None:
            return value
        alike = sorted(k for k in self.settings if k.lower() == name.lower())
        if len(alike) > 1:
            raise InvalidOptionError(f"rsm.config.{name}: the settings {', '.join('rsm.config.' + k for k in alike)} "
                                     "differ only in case, and Spark passes option keys lowercased; give the key "
                                     "files in the remoteStorageConfig file, where their case is kept")
        return self.get(alike[0]) if alike else None

    @property
    def key_pair_ids(self) -> tuple[str, ...]:
        return tuple(i.strip() for i in (self.get(ENCRYPTION_KEY_PAIRS, "") or "").split(",") if i.strip())

    def location(self) -> str | None:
        """Where the objects are by the backend's own settings: ``storage.root`` of the
        ``FileSystemStorage``, ``s3://<s3.bucket.name>`` of the ``S3Storage``; None if neither."""
        backend = self.get(STORAGE_BACKEND_CLASS, "") or ""
        if backend == S3_BACKEND or (not backend and self.get(S3_BUCKET_NAME)):
            bucket = self.get(S3_BUCKET_NAME)
            return None if not bucket else f"s3://{bucket}"
        return self.get(STORAGE_ROOT)

    def __repr__(self) -> str:
        return f"AivenConfig(source={self.source!r}, {len(self.settings)} settings)"


def _stripped(props: Mapping[str, str]) -> dict[str, str]:
    """The ``rsm.config.*`` entries of ``props``, prefix removed (other keys are the broker's)."""
    n = len(RSM_CONFIG_PREFIX)
    return {k[n:]: v for k, v in props.items() if k.startswith(RSM_CONFIG_PREFIX)}
