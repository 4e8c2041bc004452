"""Start perf servers without paying the SDK's import for each: import it once, fork.

Importing ``zav.agents_sdk`` costs about ten seconds of CPU (pandas, matplotlib, openai),
and the proof starts two servers per backend. This process imports the SDK, uvicorn and
the bridge once, single-threaded, and then forks one process per server it is asked
for: each child sets its environment, sends its output to its log, imports the app
(``tests.zav.perf_app``, which reads its environment then) and runs it under uvicorn,
as ``za agents perf server`` does. A child is a process of its own: killed, frozen
(SIGSTOP) or exiting (``POST /perf/kill``) as any server is; this process reaps it.

Protocol on stdin/stdout, one JSON object a line: ``{"env": {...}, "log": path,
"port": n, "cwd": dir}`` -> ``{"pid": n}``. It prints ``ready`` once the imports are done
and exits when stdin closes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import Any


def _reap(signum: int, frame: Any) -> None:
    """Collect every child that exited, so its pid stops answering at once."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _serve(request: dict[str, Any]) -> None:
    """In the child: become the server ``request`` describes; never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.path.insert(0, request["cwd"])
        import uvicorn

        uvicorn.run("tests.zav.perf_app:app", host="127.0.0.1", port=int(request["port"]))
    except BaseException as exc:  # the log is the only witness left
        print(f"perf server failed: {exc!r}", file=sys.stderr, flush=True)
        os._exit(1)
    os._exit(0)


def main() -> None:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
    import zav.agents_sdk
    from zav.agents_sdk import setup_app  # noqa: F401

    import agentstores_zav  # noqa: F401

    del zav
    if threading.active_count() != 1:
        raise RuntimeError("a thread runs after the imports: forking would be unsafe")
    signal.signal(signal.SIGCHLD, _reap)
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _serve(request)
        print(json.dumps({"pid": pid}), flush=True)


if __name__ == "__main__":
    main()
