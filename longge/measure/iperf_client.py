"""One iperf3 client test through libiperf (python-iperf3), run as its own process:

    python -m longge.measure.iperf_client SPEC_JSON OUT_FILE

It writes libiperf's JSON result (or {"error": ...}) to OUT_FILE. Running each test in a
fresh process is how we live with python-iperf3's traps (docs/design.md §3): a ``Client`` runs
once, it redirects the process's stdout, Ctrl-C does not stop it, and it hangs once its JSON
passes the 64 KiB of its pipe (we enlarge the pipe to 1 MiB, and the caller has a timeout).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import sys
from typing import Any

_F_SETPIPE_SZ = 1031


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import iperf3

    client = iperf3.Client()
    for fd in (client._pipe_in, client._pipe_out):  # python-iperf3's stdout capture pipe
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)
    client.server_hostname = spec["host"]
    client.port = int(spec["port"])
    client.protocol = spec["protocol"]
    client.duration = int(spec["duration"])
    client.num_streams = int(spec.get("streams", 1))
    client.reverse = bool(spec.get("reverse", False))
    # Always set both: python-iperf3's defaults are an unlimited rate and 64 KB UDP datagrams
    # (128 KB TCP writes, which alone exceed a low target rate). iperf3's rate is per stream.
    streams = max(1, int(spec.get("streams", 1)))
    if spec.get("rate_bps"):
        client.bandwidth = max(1, int(spec["rate_bps"]) // streams)
    client.blksize = int(spec["length"])
    if spec.get("congestion"):  # iperf3 -C: not wrapped by python-iperf3, but in libiperf
        fn = client.lib.iperf_set_test_congestion_control
        fn.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
        fn(client._test, str(spec["congestion"]).encode())
    if spec.get("bidir"):  # iperf3 --bidir (3.7+): not wrapped by python-iperf3
        fn = client.lib.iperf_set_test_bidirectional
        fn.argtypes = (ctypes.c_void_p, ctypes.c_int)
        fn(client._test, 1)
    client.json_output = True
    result = client.run()
    raw: dict[str, Any] = result.json if getattr(result, "json", None) else {}
    if not raw:
        raw = {"error": getattr(result, "error", None) or "no result from libiperf"}
    return raw


def main() -> None:
    spec = json.loads(sys.argv[1])
    out = sys.argv[2]
    try:
        raw = run(spec)
    except Exception as exc:  # report, do not crash silently: the sweep records the error
        raw = {"error": f"{type(exc).__name__}: {exc}"}
    with open(out, "w") as f:
        json.dump(raw, f)


if __name__ == "__main__":
    main()
