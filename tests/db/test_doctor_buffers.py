"""`doctor` on PostgreSQL says whether `shared_buffers` holds the vector tables (#34): recall's exact
rescoring reads 100 vector rows at random per query, from the OS when the buffer cache cannot hold
them (100k memories: 3.6 ms per KNN at the default 128 MB, 1.2 ms at 512 MB)."""

from __future__ import annotations

import io

import psycopg
import pytest
from conftest import make_settings
from support import postgres

from vantage_peers.doctor import run_doctor

pytestmark = [pytest.mark.postgres, pytest.mark.slow,  # writes a table larger than the server's buffer cache
              pytest.mark.skipif(postgres.available() is not None, reason=str(postgres.available()))]


def _buffer_line(settings) -> str:
    out = io.StringIO()
    run_doctor(settings, out=out)
    lines = [line for line in out.getvalue().splitlines() if "buffer cache" in line]
    assert len(lines) == 1, out.getvalue()
    return lines[0]


def test_doctor_warns_when_the_vector_tables_outgrow_shared_buffers(tmp_path):
    url = postgres.fresh_database()
    settings = make_settings(tmp_path / "unused.db", database_url=url)
    try:
        assert _buffer_line(settings).startswith("[  ok] buffer cache: shared_buffers ")  # no vectors yet
        with psycopg.connect(url, autocommit=True) as c:
            buffers = c.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()[0]
            if buffers > 512 * 2**20:
                pytest.skip("this server's shared_buffers is too large to outgrow in a test")
            # Rows of 1,900 bytes stay uncompressed (under the TOAST threshold): four to a page.
            rows = buffers // 1900 + 4_000
            c.execute("CREATE TABLE ballast_vec (seq BIGINT PRIMARY KEY, pad TEXT)")
            c.execute("INSERT INTO ballast_vec SELECT g, repeat('x', 1900) FROM generate_series(1, %s) g", [rows])
            c.execute("INSERT INTO vectorModels (name, model, dimensions, createdAt) VALUES ('ballast_vec', 'm', 8, 0)")
        line = _buffer_line(settings)
        assert line.startswith("[WARN] buffer cache: shared_buffers is ") and "raise shared_buffers" in line
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("DELETE FROM vectorModels WHERE name = 'ballast_vec'")
        assert _buffer_line(settings).startswith("[  ok] buffer cache")  # what is not a vector table does not count
    finally:
        postgres.drop_database(url)
