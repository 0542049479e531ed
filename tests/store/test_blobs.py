"""The blob store files objects under their hash, verifies every read and never shows a half write."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from fedchain.errors import BlobCorrupted, BlobNotFound, BlobTooLarge, StoreError, StoreURLError
from fedchain.store import BlobStore, keccak256, open_store, parse_digest, sha256, to_hex

# Published test vectors: Keccak-256 (as the EVM computes it) and SHA-256 of "" and "abc".
KECCAK_EMPTY = "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
KECCAK_ABC = "0x4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"
SHA256_ABC = "0xba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@pytest.fixture(params=["folder", "file-url", "memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    """The same store behaviour over a plain folder, a file:// URL, fsspec's memory:// and an S3 bucket (a real
    S3-compatible server on loopback)."""
    if request.param == "s3":
        return open_store(request.getfixturevalue("s3_url"))
    urls = {
        "folder": str(tmp_path / "store"),
        "file-url": (tmp_path / "store").as_uri(),
        "memory": f"memory://fedchain-tests/{uuid.uuid4().hex}",
    }
    return open_store(urls[request.param])


def test_hashes_match_published_test_vectors() -> None:
    assert to_hex(keccak256(b"")) == KECCAK_EMPTY
    assert to_hex(keccak256(b"abc")) == KECCAK_ABC
    assert to_hex(sha256(b"abc")) == SHA256_ABC


def test_put_returns_the_keccak256_of_the_exact_bytes(store: BlobStore) -> None:
    digest = store.put(b"abc")

    assert to_hex(digest) == KECCAK_ABC
    assert store.digest(b"abc") == digest


def test_get_returns_what_put_stored(store: BlobStore) -> None:
    payload = bytes(range(256)) * 100

    digest = store.put(payload)

    assert store.get(digest) == payload
    assert store.get(to_hex(digest)) == payload
    assert store.size(digest) == len(payload)


def test_exists_is_false_before_put_and_true_after(store: BlobStore) -> None:
    digest = keccak256(b"later")
    assert not store.exists(digest)

    store.put(b"later")

    assert store.exists(digest)


def test_get_of_an_absent_hash_raises_blob_not_found_naming_it(store: BlobStore) -> None:
    digest = keccak256(b"never stored")

    with pytest.raises(BlobNotFound, match=to_hex(digest)):
        store.get(digest)


def test_get_of_a_damaged_object_raises_blob_corrupted_naming_it(store: BlobStore) -> None:
    digest = store.put(b"original bytes")
    store.fs.pipe_file(store.path_of(digest), b"tampered bytes")

    with pytest.raises(BlobCorrupted, match=to_hex(digest)):
        store.get(digest)


def test_get_refuses_an_object_over_the_size_limit(store: BlobStore) -> None:
    digest = store.put(b"x" * 101)

    assert store.get(digest, max_bytes=101) == b"x" * 101
    with pytest.raises(BlobTooLarge, match="101 bytes"):
        store.get(digest, max_bytes=100)


def test_store_size_limit_applies_when_the_reader_names_none(tmp_path: Path) -> None:
    store = open_store(tmp_path, max_bytes=10)
    digest = store.put(b"eleven byte")

    with pytest.raises(BlobTooLarge):
        store.get(digest)


def test_putting_the_same_bytes_again_heals_a_damaged_copy(store: BlobStore) -> None:
    digest = store.put(b"payload")
    store.fs.pipe_file(store.path_of(digest), b"damaged")

    assert store.put(b"payload") == digest

    assert store.get(digest) == b"payload"


def test_objects_written_to_a_folder_are_read_by_another_store_on_it(tmp_path: Path) -> None:
    digest = open_store(tmp_path / "shared").put(b"from the writer")

    reader = open_store((tmp_path / "shared").as_uri())

    assert reader.get(digest) == b"from the writer"
    assert Path(reader.path_of(digest)) == tmp_path / "shared" / "keccak256" / to_hex(digest)[2:4] / to_hex(digest)[2:]


def test_a_sha256_store_files_objects_by_sha256(tmp_path: Path) -> None:
    store = open_store(tmp_path, hash_name="sha256")

    digest = store.put(b"abc")

    assert to_hex(digest) == SHA256_ABC
    assert store.get(SHA256_ABC) == b"abc"


def test_a_writer_killed_mid_write_leaves_no_object(tmp_path: Path) -> None:
    # The child writes half of the object's bytes, then dies at once (no clean-up, no exceptions).
    child = textwrap.dedent(
        f"""
        import os
        from fsspec.implementations.local import LocalFileSystem, LocalFileOpener
        from fedchain.store import BlobStore

        class DyingFile(LocalFileOpener):
            def write(self, data):
                super().write(data[: len(data) // 2])
                self.flush()
                os._exit(137)

        class DyingFileSystem(LocalFileSystem):
            def _open(self, path, mode="rb", **kwargs):
                return DyingFile(path, mode, fs=self, **kwargs)

        BlobStore(DyingFileSystem(), {str(tmp_path)!r}, url="dying").put(b"y" * 1_000_000)
        """
    )

    result = subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=60)

    assert result.returncode == 137, result.stderr.decode()
    store = open_store(tmp_path)
    assert not store.exists(keccak256(b"y" * 1_000_000))
    assert [p.stat().st_size for p in (tmp_path / "tmp").iterdir()] == [500_000]  # the half write is only a .part


def test_a_store_folder_that_cannot_be_created_is_a_store_error_saying_what_to_pass(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")

    with pytest.raises(StoreError, match="cannot create the store folder") as caught:
        BlobStore.open(tmp_path / "a-file" / "store")
    assert "--store" in (caught.value.hint or "")


def test_an_unknown_url_scheme_raises_store_url_error() -> None:
    with pytest.raises(StoreURLError, match="unknown blob store scheme 'nosuch'"):
        open_store("nosuch://bucket/prefix")


def test_a_url_whose_backend_is_not_installed_says_what_to_install() -> None:
    # gcs:// is one of fsspec's schemes; its backend (gcsfs) is not a FedChain dependency
    with pytest.raises(StoreURLError, match="needs a package that is not installed") as raised:
        open_store("gcs://bucket/prefix")

    assert "'gcs' backend" in raised.value.hint


@pytest.mark.parametrize("text", [KECCAK_ABC, KECCAK_ABC[2:], KECCAK_ABC.upper().replace("0X", "0x")])
def test_parse_digest_accepts_hex_with_or_without_prefix(text: str) -> None:
    assert parse_digest(text) == bytes.fromhex(KECCAK_ABC[2:])


@pytest.mark.parametrize("value", ["0x1234", "not hex at all", b"\x00" * 31, 42])
def test_parse_digest_rejects_anything_but_32_bytes(value: object) -> None:
    with pytest.raises(StoreError):
        parse_digest(value)  # type: ignore[arg-type]
