"""A content-addressed blob store over a local folder or any fsspec URL.

Objects are immutable byte strings filed under their own hash, so a reader
that knows a hash (from an on-chain event) can fetch the object from anyone's
store and verify it. Layout below the store's root::

    keccak256/ab/ab12...ef      one object, named by the full hex digest
    tmp/<random>.part           writes in progress (never read as objects)
    boards/<board>/<name>       small notes pinned by name (signed verdicts the arbiters exchange); a
                                note is not named by its hash, so its reader authenticates it (a signature)

A write goes to ``tmp/`` first and is renamed into place when complete, so a
writer killed half-way leaves at worst a stray ``.part`` file, never a half
object. Every read checks the size limit before reading and the hash after.

>>> store = BlobStore.open("memory://doc-example")
>>> digest = store.put(b"hello")
>>> store.get(digest)
b'hello'
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import fsspec
import fsspec.core
from fsspec import AbstractFileSystem

from fedchain.errors import BlobCorrupted, BlobNotFound, BlobTooLarge, StoreError, StoreUnavailable, StoreURLError
from fedchain.store.digest import CANONICAL_HASH, HASHES, HashName, parse_digest, to_hex

log = logging.getLogger(__name__)

#: Where the store lives when no URL is given: a folder below the working directory.
DEFAULT_STORE_URL = ".fedchain/store"

#: The read limit when the caller names none (an MNIST CNN is about 1.7 MB; CIFAR ResNets stay far below).
DEFAULT_MAX_BYTES = 512 * 1024 * 1024

#: The largest note a board holds (a signed verdict is about 400 bytes).
NOTE_MAX_BYTES = 16 * 1024

#: What a board or note name may be made of: a path segment that means the same on every filesystem.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

#: URL schemes that mean "a folder on this machine".
LOCAL_SCHEMES = (None, "file", "local")
#: URL schemes whose store lives in this process (tests, doctests): nothing to reach, nothing to check.
IN_PROCESS_SCHEMES = ("memory",)


def backend_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a store backend raises when it cannot read or write: OSError, and botocore's own (an
    unreachable endpoint, missing credentials) where s3fs is installed, which s3fs does not turn into OSError."""
    try:
        from botocore.exceptions import BotoCoreError
    except ImportError:
        return (OSError,)
    return (OSError, BotoCoreError)


def _filesystem(url: str, storage_options: Mapping[str, Any]) -> tuple[AbstractFileSystem, str]:
    """The fsspec filesystem and root path of ``url``, or a :class:`StoreURLError` that says what to do."""
    scheme, _ = fsspec.core.split_protocol(url)
    if scheme not in LOCAL_SCHEMES:
        try:
            fsspec.get_filesystem_class(scheme)
        except ValueError as err:
            raise StoreURLError(f"unknown blob store scheme {scheme!r} in {url!r}") from err
        except ImportError as err:
            raise StoreURLError(
                f"the blob store URL {url!r} needs a package that is not installed: {err}",
                hint=f"install fsspec's {scheme!r} backend (for s3://: `pip install 'fedchain[s3]'`), or use a folder path",
            ) from err
    try:
        return fsspec.core.url_to_fs(url, **storage_options)
    except (ValueError, TypeError, OSError) as err:
        raise StoreURLError(f"cannot open the blob store {url!r}: {err}") from err


class BlobStore:
    """Immutable objects named by their hash, in a folder or behind an fsspec URL.

    Construct with :meth:`open` (or :func:`open_store`). All methods are safe to
    call from several processes at once: objects are written under a temporary
    name and renamed into place.
    """

    def __init__(
        self,
        fs: AbstractFileSystem,
        root: str,
        *,
        url: str,
        hash_name: HashName = CANONICAL_HASH,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if hash_name not in HASHES:
            raise StoreError(f"unknown hash {hash_name!r}", hint=f"use one of {', '.join(HASHES)}")
        if max_bytes <= 0:
            raise StoreError(f"max_bytes must be positive, got {max_bytes}")
        self.fs = fs
        self.root = root.rstrip("/")
        self.url = url
        self.hash_name: HashName = hash_name
        self.max_bytes = max_bytes
        self._hash = HASHES[hash_name]

    @classmethod
    def open(
        cls,
        url: str | os.PathLike[str] = DEFAULT_STORE_URL,
        *,
        hash_name: HashName = CANONICAL_HASH,
        max_bytes: int = DEFAULT_MAX_BYTES,
        storage_options: Mapping[str, Any] | None = None,
    ) -> BlobStore:
        """Open the store at ``url``: a folder path, ``file://``, ``memory://``, ``s3://bucket/prefix``...

        ``storage_options`` go to the fsspec backend (credentials, endpoint).
        A local folder is created if missing.
        """
        url = os.fspath(url)
        fs, root = _filesystem(url, storage_options or {})
        store = cls(fs, root, url=url, hash_name=hash_name, max_bytes=max_bytes)
        scheme = fsspec.core.split_protocol(url)[0]
        if scheme not in (*LOCAL_SCHEMES, *IN_PROCESS_SCHEMES):
            store.check_reachable()
        if scheme in LOCAL_SCHEMES:
            try:
                Path(root).mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreError(
                    f"cannot create the store folder {root}: {err.strerror or err}",
                    hint="pass --store a folder that exists or can be created (or a URL such as s3://bucket/prefix)",
                ) from err
        return store

    def __repr__(self) -> str:
        return f"BlobStore({self.url!r}, hash_name={self.hash_name!r})"

    def check_reachable(self) -> None:
        """Read the bucket (or container) the store lives in, so that a missing bucket, refused credentials or an
        unreachable endpoint stop a process at its start, with what to do, not in the middle of a task.

        :meth:`open` calls it for every store that is not a folder. Raises :class:`StoreUnavailable`.
        """
        bucket = self.root.lstrip("/").split("/", 1)[0]
        try:
            try:
                self.fs.ls(self.root, detail=False)  # the store's own few folders, however full the bucket
            except FileNotFoundError:
                self.fs.info(bucket)  # nothing under the prefix yet: fine, if the bucket is there
            finally:
                self.fs.invalidate_cache(self.root)
        except FileNotFoundError as err:
            raise StoreUnavailable(
                f"the bucket {bucket!r} of the blob store {self.url} does not exist",
                hint=f"create it first (for S3: `aws s3 mb s3://{bucket}`), or fix the --store URL",
            ) from err
        except PermissionError as err:
            raise StoreUnavailable(
                f"the blob store {self.url} refused this machine's credentials: {err}",
                hint="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) to a key that may list, read "
                "and write the bucket",
            ) from err
        except backend_errors() as err:
            raise StoreUnavailable(
                f"cannot reach the blob store {self.url}: {err}",
                hint="check the endpoint (AWS_ENDPOINT_URL for an S3-compatible server other than AWS) and the "
                "network, and that credentials are set (AWS_ACCESS_KEY_ID or AWS_PROFILE)",
            ) from err

    def digest(self, data: bytes) -> bytes:
        """The hash ``data`` is filed under in this store."""
        return self._hash(data)

    def _write(self, path: str, data: bytes, what: str) -> None:
        """Write ``data`` at ``path`` whole or not at all: to a temporary object first, then moved into place."""
        temporary = f"{self.root}/tmp/{uuid.uuid4().hex}.part"
        try:
            self.fs.makedirs(f"{self.root}/tmp", exist_ok=True)
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            with self.fs.open(temporary, "wb") as file:
                file.write(data)
            self.fs.mv(temporary, path)
        except backend_errors() as err:
            raise StoreError(f"cannot write {what} to {self.url}: {err}") from err

    def path_of(self, digest: bytes | str) -> str:
        """Where the object named ``digest`` lives (a path inside the store's filesystem)."""
        hex_digest = parse_digest(digest).hex()
        return f"{self.root}/{self.hash_name}/{hex_digest[:2]}/{hex_digest}"

    def put(self, data: bytes) -> bytes:
        """Store ``data`` and return its hash (32 bytes).

        Writing the same bytes again is harmless: the object is replaced by
        identical bytes (which also heals a damaged copy).
        """
        data = bytes(data)
        digest = self._hash(data)
        self._write(self.path_of(digest), data, f"object {to_hex(digest)}")
        log.debug("stored %s (%d bytes) in %s", to_hex(digest), len(data), self.url)
        return digest

    def exists(self, digest: bytes | str) -> bool:
        """Whether an object named ``digest`` is in the store (its bytes are not checked)."""
        try:
            return bool(self.fs.exists(self.path_of(digest)))
        except backend_errors() as err:
            raise StoreError(f"cannot look for object {to_hex(parse_digest(digest))} in {self.url}: {err}") from err

    def size(self, digest: bytes | str) -> int:
        """The stored size in bytes of the object named ``digest``."""
        path = self.path_of(digest)
        try:
            return int(self.fs.size(path))
        except FileNotFoundError as err:
            raise BlobNotFound(f"object {to_hex(parse_digest(digest))} is not in the store {self.url}") from err
        except backend_errors() as err:
            raise StoreError(f"cannot read object {to_hex(parse_digest(digest))} from {self.url}: {err}") from err

    def get(self, digest: bytes | str, *, max_bytes: int | None = None) -> bytes:
        """The bytes of the object named ``digest``, verified against it.

        Raises :class:`BlobNotFound` if absent, :class:`BlobTooLarge` if larger
        than ``max_bytes`` (default: the store's limit; checked before reading),
        and :class:`BlobCorrupted` if the bytes do not hash to ``digest``.
        """
        digest = parse_digest(digest)
        limit = self.max_bytes if max_bytes is None else max_bytes
        name = to_hex(digest)
        size = self.size(digest)
        if size > limit:
            raise BlobTooLarge(f"object {name} in {self.url} has {size} bytes, over the limit of {limit}")
        try:
            with self.fs.open(self.path_of(digest), "rb") as file:
                data = file.read(limit + 1)
        except FileNotFoundError as err:
            raise BlobNotFound(f"object {name} is not in the store {self.url}") from err
        except backend_errors() as err:
            raise StoreError(f"cannot read object {name} from {self.url}: {err}") from err
        if len(data) > limit:
            raise BlobTooLarge(f"object {name} in {self.url} grew past the limit of {limit} bytes while read")
        actual = self._hash(data)
        if actual != digest:
            raise BlobCorrupted(
                f"object {name} in {self.url} is damaged: its {len(data)} bytes hash to {to_hex(actual)}"
            )
        return data

    # ------------------------------------------------------------------ objects filed under a commitment

    def keyed_path(self, namespace: str, key: bytes | str) -> str:
        """Where the object filed under ``key`` in ``namespace`` lives."""
        hex_key = parse_digest(key).hex()
        return f"{self.root}/{_checked_name(namespace)}/{hex_key[:2]}/{hex_key}"

    def put_keyed(self, namespace: str, key: bytes | str, data: bytes) -> None:
        """Store ``data`` under ``key`` in ``namespace``: a commitment to the data other than its hash (a Merkle
        root over what it lists). Nothing here checks that the key commits to the data: its reader must
        (:meth:`get_keyed` hands back the bytes as they are)."""
        self._write(self.keyed_path(namespace, key), bytes(data), f"{namespace} object {to_hex(parse_digest(key))}")

    def get_keyed(self, namespace: str, key: bytes | str, *, max_bytes: int | None = None) -> bytes:
        """The bytes filed under ``key`` in ``namespace`` (:class:`BlobNotFound` if absent, :class:`BlobTooLarge`
        over ``max_bytes``, default the store's limit); the caller checks that ``key`` commits to them."""
        name = to_hex(parse_digest(key))
        path = self.keyed_path(namespace, key)
        limit = self.max_bytes if max_bytes is None else max_bytes
        try:
            size = int(self.fs.size(path))
            if size > limit:
                raise BlobTooLarge(
                    f"{namespace} object {name} in {self.url} has {size} bytes, over the limit of {limit}"
                )
            with self.fs.open(path, "rb") as file:
                data = file.read(limit + 1)
        except FileNotFoundError as err:
            raise BlobNotFound(f"{namespace} object {name} is not in the store {self.url}") from err
        except backend_errors() as err:
            raise StoreError(f"cannot read {namespace} object {name} from {self.url}: {err}") from err
        if len(data) > limit:
            raise BlobTooLarge(
                f"{namespace} object {name} in {self.url} grew past the limit of {limit} bytes while read"
            )
        return data

    # ------------------------------------------------------------------ boards

    def pin(self, board: str, name: str, data: bytes) -> None:
        """Pin the note ``name`` (at most NOTE_MAX_BYTES) on ``board``, atomically; a note of that name is replaced.

        Notes are how parties that share a store but no connection exchange small signed messages (the arbiters'
        verdict signatures). Nothing vouches for a note but its content: its reader must authenticate it.
        """
        data = bytes(data)
        if len(data) > NOTE_MAX_BYTES:
            raise StoreError(f"a note holds at most {NOTE_MAX_BYTES} bytes, got {len(data)}")
        folder = self._board(board)
        path = f"{folder}/{_checked_name(name)}"
        temporary = f"{self.root}/tmp/{uuid.uuid4().hex}.part"
        try:
            self.fs.makedirs(f"{self.root}/tmp", exist_ok=True)
            self.fs.makedirs(folder, exist_ok=True)
            with self.fs.open(temporary, "wb") as file:
                file.write(data)
            self.fs.mv(temporary, path)
        except backend_errors() as err:
            raise StoreError(f"cannot pin note {board}/{name} in {self.url}: {err}") from err

    def notes(self, board: str) -> dict[str, bytes]:
        """Every note pinned on ``board``, by name (empty when nothing was pinned); oversized notes are skipped."""
        folder = self._board(board)
        self.fs.invalidate_cache(folder)  # an object store's client caches listings: another process pins notes
        try:
            entries = self.fs.ls(folder, detail=True) if self.fs.exists(folder) else []
        except FileNotFoundError:
            return {}
        except backend_errors() as err:
            raise StoreError(f"cannot list board {board} in {self.url}: {err}") from err
        notes = {}
        for entry in entries:
            name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
            if (
                entry.get("type") != "file"
                or not NAME_PATTERN.match(name)
                or int(entry.get("size") or 0) > NOTE_MAX_BYTES
            ):
                continue
            try:
                with self.fs.open(f"{folder}/{name}", "rb") as file:
                    notes[name] = file.read(NOTE_MAX_BYTES + 1)[:NOTE_MAX_BYTES]
            except FileNotFoundError:
                continue  # replaced while listed: the next read sees the new one
            except backend_errors() as err:
                raise StoreError(f"cannot read note {board}/{name} from {self.url}: {err}") from err
        return notes

    def _board(self, board: str) -> str:
        return f"{self.root}/boards/{'/'.join(_checked_name(part) for part in board.split('/'))}"


def _checked_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise StoreError(
            f"{name!r} is not a board or note name", hint="use letters, digits, '.', '_' and '-' (up to 128)"
        )
    return name


#: ``open_store(url, ...)``: the same as :meth:`BlobStore.open`.
open_store = BlobStore.open
