"""Nothing reachable beyond the link (issue 39): the base forwards only the link's traffic to
its uplink and what comes back; the measurement servers listen on the link's address and give
up root; the RTT echo cannot be made a reflector by source churn; the control and air sockets
are root's and their group's, made so without following a symlink; a key others can read is
refused when a config is loaded."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from test_daemon_tun import in_own_namespace

from longge.config import NodeConfig, PeerConfig
from longge.configfile import load
from longge.daemon import control
from longge.errors import ConfigError
from longge.measure.rtt import PROBE_LEN, EchoCore, encode_probe
from longge.sockets import make_unix_socket

root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespace, setuid)")
_CTX = multiprocessing.get_context("fork")


# -- the RTT echo --------------------------------------------------------------------------------


def test_source_churn_does_not_reset_a_limited_clients_rate() -> None:
    """A victim's address spoofed at the echo: its burst spent, it is limited. Then 5000
    probes from 5000 other sources fill the 1024-entry table: once the oldest entry was
    forgotten to make room, and the victim's next probe found a full burst again (a 1:1
    reflector for whoever can spoof). Now only a client whose bucket has refilled is forgotten:
    the victim stays limited, and the newcomers beyond the table are turned away, counted."""
    core = EchoCore(rate_pps=10, burst=20, max_clients=1024)
    probe = encode_probe(1, 0, PROBE_LEN)
    now = 100.0
    echoed = sum(core.handle(probe, ("192.0.2.7", 9), now) is not None for _ in range(50))
    assert echoed == 20
    for i in range(5000):
        core.handle(probe, (f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", 9), now + 0.0001)
    assert core.handle(probe, ("192.0.2.7", 9), now + 0.001) is None
    assert core.counters["clients_full"] > 0
    # an idle client's bucket refills: once full it may be forgotten, for nothing is lost
    later = now + 10.0
    assert core.handle(probe, ("198.51.100.1", 9), later) is not None


# -- sockets made root's and their group's -------------------------------------------------------


def test_a_unix_socket_is_made_0660_and_a_symlink_in_its_place_is_not_followed(
    tmp_path: Path,
) -> None:
    target = tmp_path / "victim"
    target.write_text("not a socket")
    target.chmod(0o600)
    path = tmp_path / "c.sock"
    path.symlink_to(target)
    sock = make_unix_socket(str(path), socket.SOCK_STREAM, 0o660)
    try:
        assert (path.stat().st_mode & 0o777) == 0o660 and not path.is_symlink()
        assert (target.stat().st_mode & 0o777) == 0o600 and target.read_text() == "not a socket"
    finally:
        sock.close()


def test_32_silent_connections_do_not_lock_status_out(tmp_path: Path) -> None:
    """32 connections that never say anything once filled every slot: status was refused
    ("too many control connections") until they went away. Now a new one takes the place of
    the connection silent the longest."""
    path = str(tmp_path / "c.sock")
    server = control.ControlServer(path, lambda req: {"ok": True})
    silent = []
    try:
        for _ in range(control.MAX_CLIENTS):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(path)
            silent.append(c)
            server.service([server.sock])  # (the listen backlog is 16)
        assert len(server.clients) == control.MAX_CLIENTS

        answer: dict[str, Any] = {}

        def ask() -> None:
            answer.update(control.request(path, {"cmd": "status"}, timeout=5))

        import threading

        t = threading.Thread(target=ask)
        t.start()
        while t.is_alive():
            server.service([server.sock, *server.clients])
            time.sleep(0.01)
        assert answer == {"ok": True}
        assert server.counts()["clients_idle"] >= 1 and server.counts()["clients_refused"] == 0
    finally:
        for c in silent:
            c.close()
        server.close()


@root
def test_a_user_neither_root_nor_of_the_group_is_refused(tmp_path: Path) -> None:
    """Even where the socket's mode would let anyone connect (a folder or mode loosened by
    hand), a process of another user and group is turned away (SO_PEERCRED), and counted."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    folder = Path(tempfile.mkdtemp(prefix="longge-peercred-"))  # (pytest's is root's alone)
    folder.chmod(0o755)
    path = str(folder / "c.sock")
    server = control.ControlServer(path, lambda req: {"ok": True})
    os.chmod(path, 0o666)  # (as a careless admin would)
    said, say = _CTX.Pipe(duplex=False)

    def as_nobody() -> None:
        os.setgroups([])
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)
        try:
            say.send(control.request(path, {"cmd": "status"}, timeout=5))
        except Exception as exc:
            say.send({"raised": repr(exc)})

    proc = _CTX.Process(target=as_nobody)
    proc.start()
    try:
        deadline = time.monotonic() + 10
        while not said.poll(0.01) and time.monotonic() < deadline:
            server.service([server.sock, *server.clients])
        reply = said.recv()
        assert "not allowed" in str(reply.get("error")), reply
        assert server.counts()["peers_refused"] == 1
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as ours:  # root still is
            ours.connect(path)
            server.service([server.sock])
            assert len(server.clients) == 1 and server.counts()["peers_refused"] == 1
    finally:
        proc.join(5)
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


# -- keys ------------------------------------------------------------------------------------------


def _config(tmp_path: Path, security: str, mode: int = 0o600) -> Path:
    cfg = tmp_path / "longge.toml"
    cfg.write_text(f'[node]\nrole = "base"\n[security]\n{security}\n')
    cfg.chmod(mode)
    return cfg


def test_a_key_file_others_can_read_is_refused_by_name(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text(bytes(range(32)).hex() + "\n")
    key.chmod(0o644)
    cfg = _config(tmp_path, f'key_file = "{key}"\nstate_dir = "{tmp_path}"')
    with pytest.raises(ConfigError) as err:
        load(cfg)
    assert err.value.key == "security.key_file" and "chmod 600" in str(err.value)
    key.chmod(0o600)
    assert load(cfg).peers[0].key == bytes(range(32))


def test_a_key_written_into_a_config_others_can_read_is_refused(tmp_path: Path) -> None:
    cfg = _config(tmp_path, f'key = "{bytes(range(32)).hex()}"\nstate_dir = "{tmp_path}"', 0o644)
    with pytest.raises(ConfigError) as err:
        load(cfg)
    assert err.value.key == "security.key" and bytes(range(32)).hex() not in str(err.value)
    cfg.chmod(0o600)
    assert load(cfg).peers[0].key == bytes(range(32))


# -- the base's forwarding -------------------------------------------------------------------------


def _base(tmp_path: Path) -> NodeConfig:
    """A base on TUN lgfwd0 (which need not exist: the rules name it)."""
    return NodeConfig(
        role="base",
        tun="lgfwd0",
        address="10.24.0.1/24",
        peers=(PeerConfig(address="10.24.0.2"),),
        insecure=True,
        state_dir=str(tmp_path),
    )


def _iptables_s(chain: str, table: str = "filter") -> list[str]:
    out = subprocess.run(
        ["iptables", "-t", table, "-S", chain], capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


@root
def test_the_base_forwards_the_link_to_its_uplink_and_nothing_else(tmp_path: Path) -> None:
    """In a namespace of its own with a default route via eth9: the base's chain is jumped to
    first in FORWARD and lets out only the link's traffic to the default route's interface and
    what comes back on those connections; all else to or from the TUN is dropped. NAT only to
    that interface. The undo steps leave no rule behind."""
    cfg = _base(tmp_path)

    def base() -> dict[str, Any]:
        from longge.roles import FORWARDING, setup_base

        for cmd in (
            ["ip", "link", "add", "eth9", "type", "veth", "peer", "name", "eth9p"],
            ["ip", "addr", "add", "192.0.2.2/24", "dev", "eth9"],
            ["ip", "link", "set", "eth9", "up"],
            ["ip", "route", "add", "default", "via", "192.0.2.1"],
        ):
            subprocess.run(cmd, check=True, capture_output=True)
        undo = setup_base(cfg)
        seen = {
            "forward": _iptables_s("FORWARD"),
            "chain": _iptables_s("LONGGE-lgfwd0"),
            "input": _iptables_s("INPUT") + _iptables_s("LONGGE-IN-lgfwd0"),
            "nat": _iptables_s("POSTROUTING", "nat"),
            "status": dict(FORWARDING["lgfwd0"]),
        }
        for u in reversed(undo):
            u()
        seen["after"] = _iptables_s("FORWARD") + _iptables_s("POSTROUTING", "nat")
        seen["chains"] = subprocess.run(
            ["iptables", "-S"], capture_output=True, text=True
        ).stdout.splitlines()
        # a machine that was a router before the daemon: its other interfaces keep forwarding
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
        undo = setup_base(cfg)
        seen["router_chain"] = _iptables_s("LONGGE-lgfwd0")
        for u in reversed(undo):
            u()
        seen["router_after"] = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
        return seen

    seen = in_own_namespace(base)
    assert isinstance(seen, dict), seen
    assert seen["forward"][1] == "-A FORWARD -j LONGGE-lgfwd0", seen["forward"]
    assert seen["chain"][1:] == [
        "-A LONGGE-lgfwd0 -i lgfwd0 -o eth9 -j ACCEPT",
        "-A LONGGE-lgfwd0 -i eth9 -o lgfwd0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
        "-A LONGGE-lgfwd0 -i lgfwd0 -j DROP",
        "-A LONGGE-lgfwd0 -o lgfwd0 -j DROP",
        # (issue 67: the namespace forwarded nothing before: its other interfaces neither now)
        "-A LONGGE-lgfwd0 -j DROP",
    ]
    assert seen["router_chain"][1:] == seen["chain"][1:-1]  # (a router before: no last DROP)
    assert seen["router_after"] == "1"
    assert seen["input"][1:2] == ["-A INPUT -j LONGGE-IN-lgfwd0"], seen["input"]
    assert seen["input"][-3:] == [
        "-A LONGGE-IN-lgfwd0 -i lgfwd0 -j RETURN",
        "-A LONGGE-IN-lgfwd0 -i lo -j RETURN",
        "-A LONGGE-IN-lgfwd0 -d 10.24.0.1/32 -j DROP",
    ]
    assert "-A POSTROUTING -s 10.24.0.0/24 -o eth9 -j MASQUERADE" in seen["nat"]
    assert (
        seen["status"]["uplink"] == "eth9" and seen["status"]["uplink_from"] == "the default route"
    )
    assert not any("LONGGE" in line or "MASQUERADE" in line for line in seen["after"])
    assert not any("LONGGE" in line for line in seen["chains"])


@root
def test_a_base_without_an_uplink_forwards_nothing(tmp_path: Path) -> None:
    cfg = _base(tmp_path)

    def base() -> list[str]:
        from longge.roles import setup_base

        undo = setup_base(cfg)
        rules = _iptables_s("LONGGE-lgfwd0")
        for u in reversed(undo):
            u()
        return rules

    rules = in_own_namespace(base)
    assert rules[1:] == [
        "-A LONGGE-lgfwd0 -i lgfwd0 -j DROP",
        "-A LONGGE-lgfwd0 -o lgfwd0 -j DROP",
        "-A LONGGE-lgfwd0 -j DROP",
    ]


# -- the measurement servers ----------------------------------------------------------------------


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@root
def test_the_servers_listen_on_the_link_address_only_and_not_as_root(tmp_path: Path) -> None:
    """Bound to 127.0.0.2 (standing for the link's address): both sockets there and nowhere
    else, a probe to another address of the machine unanswered, the processes no longer
    root once ready."""
    from longge.measure.servers import run_servers

    iperf_port, rtt_port = _free_port(socket.SOCK_STREAM), _free_port(socket.SOCK_DGRAM)
    ready = _CTX.Event()
    proc = _CTX.Process(
        target=run_servers,
        args=(iperf_port, rtt_port, None),
        kwargs={"ready": lambda s: ready.set(), "host": "127.0.0.2", "user": "nobody"},
    )
    proc.start()
    try:
        assert ready.wait(20), "the servers never said they were ready"
        listening = ""
        deadline = time.monotonic() + 10
        while f":{iperf_port}" not in listening and time.monotonic() < deadline:
            listening = subprocess.run(
                ["ss", "-Hlntu"], capture_output=True, text=True, check=True
            ).stdout
            time.sleep(0.1)
        ours = [
            ln for ln in listening.splitlines() if f":{iperf_port} " in ln or f":{rtt_port} " in ln
        ]
        assert len(ours) == 2 and all("127.0.0.2:" in ln for ln in ours), listening
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
            c.settimeout(0.5)
            c.sendto(encode_probe(1, 0), ("127.0.0.1", rtt_port))
            with pytest.raises(OSError):  # (timeout, or refused)
                c.recvfrom(2048)
            c.sendto(encode_probe(2, 0), ("127.0.0.2", rtt_port))
            assert c.recvfrom(2048)[0][:4] == b"LGRT"
        status = Path(f"/proc/{proc.pid}/status").read_text()
        uid_line = next(ln for ln in status.splitlines() if ln.startswith("Uid:"))
        assert "0" not in uid_line.split()[1:], uid_line
    finally:
        proc.terminate()
        proc.join(10)


def test_the_servers_address_comes_from_bind_or_the_node_config(tmp_path: Path) -> None:
    from longge.commands.measure import servers_address

    cfg = tmp_path / "longge.toml"
    cfg.write_text('[node]\nrole = "base"\naddress = "10.77.0.1/24"\n')
    assert servers_address(None, str(cfg)) == "10.77.0.1"
    assert servers_address("0.0.0.0", str(cfg)) == "0.0.0.0"
    for bad in ("10.1.2", "::1", "eth0"):
        with pytest.raises(ConfigError, match="--bind"):
            servers_address(bad, str(cfg))
    with pytest.raises(ConfigError, match="--bind"):
        servers_address(None, str(tmp_path / "none.toml"))
