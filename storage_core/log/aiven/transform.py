"""The plugin's transforms, undone per chunk: AES-256-GCM, then zstd; and the key ring that
unwraps each segment's data key.

Per chunk the upload compresses, then encrypts (``transform/BaseTransformChunkEnumeration.java``,
``CompressionChunkEnumeration.java``, ``EncryptionChunkEnumeration.java``); a read undoes it in the
other order (``DecryptionChunkEnumeration.java``, ``DecompressionChunkEnumeration.java``):

* an encrypted chunk is ``IV (12 bytes) | ciphertext | tag (16 bytes)``, ``AES/GCM/NoPadding``
  with a 128-bit tag under the segment's data key, the segment's AAD fed before the chunk
  (``security/AesEncryptionProvider.java``): 28 bytes more than its input;
* a compressed chunk is one zstd frame with its content size (``zstd-jni``'s ``Zstd.compress``).

The data key (32 bytes, ``AesEncryptionProvider.KEY_SIZE`` 256 bits) is wrapped with the RSA public
key of the pair the manifest names: ``RSA/NONE/OAEPWithSHA3-512AndMGF1Padding`` from BouncyCastle,
whose OAEP and MGF1 digests are both SHA3-512, no label (``security/RsaEncryptionProvider.java``);
the pairs are PEM files (``security/RsaKeyReader.java``), named by ``encryption.key.pairs``.

Keys stay in memory: no message or log line shows a key, a wrapped key or the AAD.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from pathlib import Path
from typing import Any

import zstandard

from storage_core.log.aiven.config import AivenConfig
from storage_core.log.aiven.manifest import EncryptionMetadata

__all__ = ["GCM_TAG_BYTES", "IV_BYTES", "DataKey", "KeyRingError", "decompress_chunk", "unwrap_data_key"]

#: ``SegmentEncryptionMetadataV1.IV_SIZE``
IV_BYTES = 12
#: ``AesEncryptionProvider``: ``GCMParameterSpec(128, iv)``
GCM_TAG_BYTES = 16
#: ``AesEncryptionProvider.KEY_SIZE`` (bits / 8)
DATA_KEY_BYTES = 32


class KeyRingError(ValueError):
    """The key ring cannot unwrap a data key: internal, always raised on as the typed
    :class:`~storage_core.errors.RemoteKeyError` naming the segment (objects)."""


class ChunkTransformError(ValueError):
    """A chunk that does not undo, a failing tag, a frame that does not decompress: internal, always
    raised on as the typed :class:`~storage_core.errors.RemoteChunkError` naming the chunk (objects)."""


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers import aead
    except ImportError:  # pragma: no cover - a dependency of klog
        raise KeyRingError("reading encrypted segments needs the 'cryptography' package (pip install klog)") from None
    return aead


class DataKey:
    """A segment's unwrapped data key with its AAD: decrypts that segment's chunks.

    ``repr`` shows nothing of the key."""

    __slots__ = ("_aad", "_gcm")

    def __init__(self, key: bytes, aad: bytes) -> None:
        self._gcm = _crypto().AESGCM(key)
        self._aad = aad

    def decrypt(self, chunk: bytes | memoryview) -> bytes:
        """``IV | ciphertext | tag`` -> plaintext; :class:`ChunkTransformError` when the tag fails."""
        from cryptography.exceptions import InvalidTag

        if len(chunk) < IV_BYTES + GCM_TAG_BYTES:
            raise ChunkTransformError(f"an encrypted chunk of {len(chunk)} bytes: expected at least "
                                      f"{IV_BYTES + GCM_TAG_BYTES} (IV and tag)")
        view = memoryview(chunk)
        try:
            return bytes(self._gcm.decrypt(bytes(view[:IV_BYTES]), bytes(view[IV_BYTES:]), self._aad))
        except InvalidTag:
            raise ChunkTransformError("the AES-GCM authentication tag does not match (the chunk, the data key or the "
                                      "AAD differ from what was written)") from None

    def __repr__(self) -> str:
        return "DataKey(<hidden>)"


_PRIVATE_KEYS: dict[str, Any] = {}
_PRIVATE_KEYS_LOCK = threading.Lock()
#: unwrapped data keys by (private key file, wrapped key, AAD): a segment's key is unwrapped once per
#: process, not once per plan (each unwrap is an RSA private-key operation)
_DATA_KEYS: dict[tuple[str, bytes, bytes], DataKey] = {}
_DATA_KEYS_KEPT = 4096


def _private_key(path: str) -> Any:
    """The RSA private key of a PEM file (``RsaKeyReader``: PKCS#8 or PKCS#1 PEM), read once."""
    with _PRIVATE_KEYS_LOCK:
        key = _PRIVATE_KEYS.get(path)
    if key is not None:
        return key
    from cryptography.hazmat.primitives import serialization

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise KeyRingError(f"the private key file {path} cannot be read: {exc.strerror or exc}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise KeyRingError(f"{path} is not an unencrypted PEM RSA private key (RsaKeyReader)") from None
    with _PRIVATE_KEYS_LOCK:
        _PRIVATE_KEYS[path] = key
    return key


def unwrap_data_key(config: AivenConfig, enc: EncryptionMetadata) -> DataKey:
    """The data key ``enc`` wraps, unwrapped with the private key of the pair it names
    (``RsaEncryptionProvider.decryptDataKey``); :class:`KeyRingError` for a pair the ring does not
    name, a missing private key file, or a key that does not unwrap it (another pair's)."""
    pair = config.key_pair(enc.key_pair_id)
    if pair is None:
        raise KeyRingError(f"the data key is wrapped by key pair {enc.key_pair_id!r}, which the key ring does not "
                           f"name (rsm.config.encryption.key.pairs={','.join(config.key_pair_ids) or '<none>'})")
    if not pair.private_key_file:
        raise KeyRingError(f"key pair {enc.key_pair_id!r} has no private key: expected "
                           f"rsm.config.encryption.key.pairs.{enc.key_pair_id}.private.key.file")
    cache_key = (pair.private_key_file, enc.wrapped_key, enc.aad)
    with _PRIVATE_KEYS_LOCK:
        known = _DATA_KEYS.get(cache_key)
    if known is not None:
        return known
    key = _private_key(pair.private_key_file)
    dek = oaep_decrypt(key, enc.wrapped_key)
    if dek is None:
        raise KeyRingError(f"the private key of key pair {enc.key_pair_id!r} ({pair.private_key_file}) does not "
                           "unwrap the segment's data key (RSA-OAEP with SHA3-512 and MGF1-SHA3-512): another "
                           "key than the pair's that wrapped it")
    if len(dek) != DATA_KEY_BYTES:
        raise KeyRingError(f"the unwrapped data key of key pair {enc.key_pair_id!r} has {len(dek)} bytes: expected "
                           f"{DATA_KEY_BYTES} (AES-256)")
    out = DataKey(dek, enc.aad)
    with _PRIVATE_KEYS_LOCK:
        if len(_DATA_KEYS) >= _DATA_KEYS_KEPT:
            _DATA_KEYS.clear()
        _DATA_KEYS[cache_key] = out
    return out


def _mgf1_sha3_512(seed: bytes, length: int) -> bytes:
    """MGF1 (RFC 8017 B.2.1) over SHA3-512."""
    out = bytearray()
    counter = 0
    while len(out) < length:
        out += hashlib.sha3_512(seed + counter.to_bytes(4, "big")).digest()
        counter += 1
    return bytes(out[:length])


def oaep_decrypt(key: Any, ciphertext: bytes) -> bytes | None:
    """RSAES-OAEP decryption (RFC 8017 7.1.2) with SHA3-512 as the hash and in MGF1, empty label:
    BouncyCastle's ``OAEPWithSHA3-512AndMGF1Padding``, which OpenSSL's bindings in ``cryptography``
    do not offer. None when the ciphertext does not decode under this key (another pair's key, or
    altered bytes); which check failed is not told (RFC 8017's advice)."""
    numbers = key.private_numbers()
    n = numbers.public_numbers.n
    k = (n.bit_length() + 7) // 8
    h_len = hashlib.sha3_512().digest_size
    if len(ciphertext) != k or k < 2 * h_len + 2:
        return None
    c = int.from_bytes(ciphertext, "big")
    if c >= n:
        return None
    # RSADP by the CRT (RFC 8017 5.1.2, the second form): the same m as pow(c, d, n), about 3x faster
    m1, m2 = pow(c, numbers.dmp1, numbers.p), pow(c, numbers.dmq1, numbers.q)
    m = m2 + numbers.q * ((numbers.iqmp * (m1 - m2)) % numbers.p)
    em = m.to_bytes(k, "big")
    masked_seed, masked_db = em[1:1 + h_len], em[1 + h_len:]
    seed = bytes(a ^ b for a, b in zip(masked_seed, _mgf1_sha3_512(masked_db, h_len), strict=True))
    db = bytes(a ^ b for a, b in zip(masked_db, _mgf1_sha3_512(seed, k - h_len - 1), strict=True))
    l_hash = hashlib.sha3_512(b"").digest()
    rest = db[h_len:]
    sep = rest.find(b"\x01")
    ok = em[0] == 0 and hmac.compare_digest(db[:h_len], l_hash) and sep >= 0 and not any(rest[:sep])
    return rest[sep + 1:] if ok else None


_ZSTD = threading.local()


def decompress_chunk(chunk: bytes, expected: int) -> bytes:
    """One zstd frame -> its ``expected`` bytes (the chunk's original size);
    :class:`ChunkTransformError` otherwise."""
    dctx = getattr(_ZSTD, "dctx", None)
    if dctx is None:
        dctx = _ZSTD.dctx = zstandard.ZstdDecompressor()
    try:
        out = dctx.decompress(chunk, max_output_size=expected)
    except zstandard.ZstdError as exc:
        raise ChunkTransformError(f"the chunk is not a zstd frame of {expected} bytes: {exc}") from None
    if len(out) != expected:
        raise ChunkTransformError(f"the chunk decompresses to {len(out)} bytes: expected {expected}")
    return out


def detransform(data: bytes, *, key: DataKey | None, compressed: bool, expected: int | None,
) -> bytes:
    """A chunk's bytes as the segment had them: decrypted (``key``), then decompressed
    (``compressed``), checked to be ``expected`` bytes when given."""
    out = key.decrypt(data) if key is not None else data
    if compressed:
        if expected is None:
            raise ChunkTransformError("a compressed chunk without its original size")
        return decompress_chunk(out, expected)
    if expected is not None and len(out) != expected:
        raise ChunkTransformError(f"the chunk holds {len(out)} bytes: expected {expected}")
    return out
