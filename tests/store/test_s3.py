"""The blob store on an S3-compatible server (moto's, on loopback): shared between processes, and refusing at
its start a bucket that is missing, credentials that are refused and an endpoint that cannot be reached."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from fedchain.errors import StoreUnavailable
from fedchain.store import open_store
from tests.s3server import S3Server, free_port


def run_child(code: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=os.environ
    )
    assert result.returncode == 0, result.stderr


def test_objects_and_notes_written_by_another_process_are_read_here(s3_url: str) -> None:
    store = open_store(s3_url)
    store.pin("verdicts", "arbiter-0", b"first verdict")
    assert list(store.notes("verdicts")) == ["arbiter-0"]  # listed once: the S3 client caches that listing

    run_child(
        f"""
        from fedchain.store import open_store
        store = open_store({s3_url!r})
        store.pin("verdicts", "arbiter-1", b"signed verdict")
        print(store.put(b"an update").hex())
        """
    )

    assert store.notes("verdicts") == {"arbiter-0": b"first verdict", "arbiter-1": b"signed verdict"}
    assert store.get(store.digest(b"an update")) == b"an update"


def test_a_missing_bucket_is_refused_at_open_naming_it_and_how_to_create_it(s3_url: str) -> None:
    with pytest.raises(StoreUnavailable, match=r"the bucket 'no-such-bucket' .* does not exist") as raised:
        open_store("s3://no-such-bucket/prefix")

    assert "aws s3 mb s3://no-such-bucket" in raised.value.hint


def test_refused_credentials_are_refused_at_open_saying_which_variables_to_set(s3_url: str) -> None:
    with (
        S3Server(check_credentials=True) as strict,  # knows no key at all
        pytest.raises(StoreUnavailable, match="refused this machine's credentials") as raised,
    ):
        open_store("s3://fedchain/prefix", storage_options={"endpoint_url": strict.endpoint})

    assert "AWS_ACCESS_KEY_ID" in raised.value.hint and "AWS_PROFILE" in raised.value.hint


def test_an_endpoint_that_cannot_be_reached_is_refused_at_open_naming_the_variable(s3_url: str) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    with pytest.raises(StoreUnavailable, match="cannot reach the blob store") as raised:
        open_store("s3://fedchain/prefix", storage_options={"endpoint_url": closed})

    assert "AWS_ENDPOINT_URL" in raised.value.hint
