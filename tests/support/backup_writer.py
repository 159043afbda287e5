"""A writer process for the backup test: stores memories in a loop, acknowledging each after commit.

Usage: python backup_writer.py DB_PATH ACK_FILE TAG. Each committed memory id is appended to
ACK_FILE (flushed) only after its transaction committed; runs until killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from vantage_peers.db import open_database
from vantage_peers.domains.memory import store
from vantage_peers.pipeline.settings import Settings


def main() -> None:
    db_path, ack_path, tag = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    settings = Settings.from_env({}, dotenv=False).model_copy(update={"db_path": db_path})
    db = open_database(settings)
    with open(ack_path, "a", buffering=1, encoding="utf-8") as ack:
        i = 0
        while True:
            i += 1
            result = db.write(lambda c, i=i: store.store_memory(
                c, namespace=f"writer/{tag}", type="note", content=f"{tag} row {i} " + "x" * 200, created_by=tag))
            ack.write(result["memoryId"] + "\n")
            ack.flush()


if __name__ == "__main__":
    main()
