#!/usr/bin/env python3
"""The plugin's server launcher: `python3 launch.py [ARGS]` runs `vantage-peers [ARGS]` from the
package next to this file (plugin/.mcp.json starts the MCP server with it; the hooks run `wait`
with it; `launch.py guard install` installs the git guard).

No build step (issue #30): `uv sync --frozen --no-install-project` installs the locked dependencies
(with the `postgres` extra) into `.venv` here, and the package itself is imported from this folder
(PYTHONPATH), never built or installed. So no build backend has to be resolved, and once the locked
wheels are in uv's cache (one online start) every later start — a fresh copy of the plugin
included — works offline: locked wheels are found in the cache by their URL and hash, without the
index. Standard library only; any Python 3 runs it, the server itself runs on the Python uv picks
for the project (>= 3.11). Set VP_UV to use a uv that is not on PATH.
"""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LOCKED = ["--frozen", "--no-dev", "--extra", "postgres", "--quiet", "--project", HERE]


def main(argv):
    uv = os.environ.get("VP_UV") or shutil.which("uv")
    if not uv:
        sys.stderr.write("vantage-peers plugin: `uv` is not on PATH; install it (https://docs.astral.sh/uv/) "
                         "and restart the session\n")
        return 2
    # uv's own output goes to stderr: stdout is the MCP channel.
    done = subprocess.run([uv, "sync", "--no-install-project", *LOCKED], stdin=subprocess.DEVNULL,
                          stdout=sys.stderr.fileno())
    if done.returncode != 0:
        sys.stderr.write(f"vantage-peers plugin: `uv sync` failed in {HERE} (exit {done.returncode}); a first "
                         "start needs the network once, later starts work offline\n")
        return done.returncode
    env = dict(os.environ, PYTHONPATH=HERE)
    # -P: the package comes from here, never from a `vantage_peers` folder in the working directory.
    command = [uv, "run", "--no-sync", *LOCKED, "python", "-P", "-m", "vantage_peers.cli", *argv]
    if os.name == "posix":
        os.execvpe(uv, command, env)  # the server is this process: the client's signals reach it
    return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
