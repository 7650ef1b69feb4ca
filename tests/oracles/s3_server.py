"""The tests' S3 server: SeaweedFS's ``weed`` (see :mod:`benchmarks._s3_server`, which the object-store
benchmark shares)."""

from __future__ import annotations

from benchmarks._s3_server import ACCESS_KEY, SECRET_KEY, S3Server, server_or_skip, weed_binary

__all__ = ["ACCESS_KEY", "SECRET_KEY", "S3Server", "server_or_skip", "weed_binary"]
