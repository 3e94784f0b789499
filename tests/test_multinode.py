"""A base for several mobiles (issue 41, first steps; ESB): each mobile a [[peer]] of the base
with its own key, RX pipe and radio addresses, the daemons over in-memory TUNs and the
emulated air. The base's TX radio addresses each mobile in turn, from a queue per mobile; a
mobile that does not answer holds nobody else's packets; a key is one mobile's only."""

from __future__ import annotations

import contextlib
import json
import select
import struct
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from fielddoc import assert_documented

from longge.air.wire import query
from longge.config import NodeConfig, PeerConfig
from longge.daemon.status import NodeStatus
from longge.daemon.statusview import node_text
from longge.daemon.supervisor import Supervisor
from longge.errors import ConfigError
from longge.radio.options import RadioOptions
from longge.tun import MemoryTun

UP, DOWN = 76, 81  # the mobiles send on UP, the base on DOWN
N = 3


def key(i: int) -> bytes:
    return bytes((i * 37 + j) % 256 for j in range(32))


def mobile_ip(i: int) -> str:
    return f"10.24.0.{2 + i}"


def base_listens(i: int) -> bytes:
    """Mobile i's uplink address: the base's pipe i + 1 (only the first byte differs)."""
    return bytes((ord("L") + i,)) + b"Gm2b"


def mobile_listens(i: int) -> bytes:
    return b"LGb" + bytes((ord("2") + i,)) + b"m"


def packet(src: str, dst: str, size: int, tag: int) -> bytes:
    s, d = (bytes(int(x) for x in a.split(".")) for a in (src, dst))
    head = struct.pack("!BBHHHBBH4s4sHH", 0x45, 0, size, tag, 0, 64, 17, 0, s, d, 4000, 5000)
    return (head + tag.to_bytes(4, "big") * 400)[:size]


def base_config(tmp: Path, air: str, mobiles: int = N) -> NodeConfig:
    peers = tuple(
        PeerConfig(
            name=f"mobile{i + 1}",
            address=mobile_ip(i),
            tx_address=mobile_listens(i),
            rx_address=base_listens(i),
            key=key(i),
        )
        for i in range(mobiles)
    )
    return NodeConfig(
        role="base",
        address="10.24.0.1/24",
        peers=peers,
        air=air,
        control=str(tmp / "b.sock"),
        tx_channel=DOWN,
        rx_channel=UP,
        queue_ms=5000,
        radio=RadioOptions(ard_us=1000, arc=15),
        state_dir=str(tmp / "base-state"),
    )


def mobile_config(tmp: Path, air: str, i: int, with_key: bytes | None = None) -> NodeConfig:
    return NodeConfig(
        role="mobile",
        address=f"{mobile_ip(i)}/24",
        peers=(
            PeerConfig(
                name="base",
                address="10.24.0.1",
                tx_address=base_listens(i),
                rx_address=mobile_listens(i),
                key=with_key or key(i),
            ),
        ),
        air=air,
        control=str(tmp / f"m{i}.sock"),
        tx_channel=UP,
        rx_channel=DOWN,
        queue_ms=5000,
        # (retries staggered: mobiles that collide on the uplink try again apart)
        radio=RadioOptions(ard_us=1000 + 250 * i, arc=15),
        state_dir=str(tmp / f"m{i}-state"),
    )


def in_mode(cfg: NodeConfig, mode: str) -> NodeConfig:
    """``cfg`` in link mode ``mode`` (its other radio settings kept)."""
    return replace(cfg, radio=replace(cfg.radio, mode=mode))


class Star:
    def __init__(self, base: Supervisor, btun: MemoryTun) -> None:
        self.base, self.btun = base, btun
        self.mobiles: list[Supervisor] = []
        self.mtuns: list[MemoryTun] = []

    def step(self) -> None:
        self.base.step(0)
        for m in self.mobiles:
            m.step(0)

    def run(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.step()
            time.sleep(0.01)

    def collect(self, tun: MemoryTun, want: int, timeout: float) -> list[bytes]:
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            if select.select([tun.peer], [], [], 0.005)[0]:
                got.append(tun.peer.recv(65536))
            self.step()
        return got

    def fifo_full(self) -> dict[str, int]:
        """The air's count, by radio, of frames a receiver's full RX FIFO left unacknowledged."""
        radios = query(self.base.cfg.air)["air"]["radios"]
        return {name: int(r.get("rx_fifo_full", 0)) for name, r in radios.items()}

    def each_gets_its_own(self, step: int) -> None:
        """12 packets for each mobile (300 + step·k bytes), interleaved on the base's TUN:
        each mobile gets its own, whole and in order, and nobody else's. In ESB a frame its
        receiver's full FIFO refused till the retries ran out loses its packet (the chip
        cannot acknowledge it: a radio process the machine held up for a few ms, with adapt's
        short retries): a packet may be missing only where the air counted that."""
        before = self.fifo_full()
        sent: list[list[bytes]] = [[] for _ in self.mobiles]
        for k in range(12):
            for i, mine in enumerate(sent):
                mine.append(packet("10.24.0.1", mobile_ip(i), 300 + step * k, 100 * i + k))
                self.btun.peer.send(mine[-1])
        for i, mine in enumerate(sent):
            got = self.collect(self.mtuns[i], len(mine), 20)
            # (in full: what the base's TX did and what mobile i heard, for a rare failure)
            why = {"base tx": self.base.status()["tx"], "mobile": self.mobiles[i].status()}
            assert got == [p for p in mine if p in got], f"mobile {i}: {json.dumps(why)}"
            if got == mine:
                continue
            cfg = self.mobiles[i].cfg
            rx = f"{cfg.air_name or cfg.role}-rx"
            refused = self.fifo_full().get(rx, 0) - before.get(rx, 0)
            why["refused by a full RX FIFO"] = refused
            whole = f"mobile {i}: {len(got)} of {len(mine)} {json.dumps(why)}"
            assert cfg.radio.mode == "esb" and refused > 0, whole

    def all_send_at_once(self, count: int) -> tuple[list[list[bytes]], list[bytes]]:
        """Every mobile sends ``count`` 1000-byte packets at once (interleaved): what each
        sent, and what came out of the base's TUN (in 30 s at most)."""
        sent = [
            [packet(mobile_ip(i), "10.24.0.1", 1000, 2000 + 100 * i + k) for k in range(count)]
            for i in range(len(self.mobiles))
        ]
        for k in range(count):
            for i, mine in enumerate(sent):
                self.mtuns[i].peer.send(mine[k])
        return sent, self.collect(self.btun, len(sent) * count, 30)

    def heard(self, timeout: float = 10.0) -> bool:
        """Every mobile has heard the base, and the base every mobile (keepalives)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.step()
            time.sleep(0.02)
            if all(m.status()["link"] == "up" for m in self.mobiles):
                rx = self.base.status()["rx"]
                if rx.get("security", {}).get("opened", 0) >= len(self.mobiles):
                    return True
        return False


@contextlib.contextmanager
def star(
    air: str, tmp: Path, mobiles: list[NodeConfig], base: NodeConfig | None = None
) -> Iterator[Star]:
    btun = MemoryTun("b0")
    s = Star(Supervisor(base or base_config(tmp, air), btun, network=False), btun)
    s.base.start()
    try:
        for i, cfg in enumerate(mobiles):
            tun = MemoryTun(f"m{i}")
            sup = Supervisor(cfg, tun, network=False)
            sup.start()
            s.mobiles.append(sup)
            s.mtuns.append(tun)
        yield s
    finally:
        for m in s.mobiles:
            m.shutdown()
        s.base.shutdown()


def test_the_base_sends_each_mobile_its_own_packets(air_path: str, tmp_path: Path) -> None:
    """Packets for three mobiles, interleaved on the base's TUN: each mobile gets its own,
    whole and in order, and nobody else's; then each mobile's reach the base."""
    cfgs = [mobile_config(tmp_path, air_path, i) for i in range(N)]
    with star(air_path, tmp_path, cfgs) as s:
        assert s.heard(), s.base.status()["rx"]
        s.each_gets_its_own(37)
        for i in range(N):  # one after another: the uplink's collisions are not this test's
            ups = [packet(mobile_ip(i), "10.24.0.1", 500, 1000 + 10 * i + k) for k in range(5)]
            for p in ups:
                s.mtuns[i].peer.send(p)
            assert s.collect(s.btun, len(ups), 20) == ups, s.base.status()["rx"]
        s.run(0.6)  # (the radio processes send their counters every 0.25 s)
        st = s.base.status()
        assert st["tx"]["no_route"] == 0
        # status per mobile: its link, what was sent it, what came from it (typed, documented)
        typed = NodeStatus.of(st)
        assert [p.name for p in typed.peers] == [f"mobile{i + 1}" for i in range(N)]
        for p in typed.peers:
            assert p.link == "up" and p.sent["packets_sent"] >= 12, p
            assert p.received["security"]["opened"] >= 5, p
        assert_documented({"base": st}, "status --json")
        assert "peer   mobile3 10.24.0.4: link UP" in node_text(st)


def test_a_mobile_that_does_not_answer_holds_nobody_elses_packets(
    air_path: str, tmp_path: Path
) -> None:
    """Mobile 3 is configured at the base but never comes: its packets meet MAX_RT and wait
    (backed off) while the two others get all of theirs."""
    cfgs = [mobile_config(tmp_path, air_path, i) for i in range(N - 1)]
    with star(air_path, tmp_path, cfgs) as s:
        assert s.heard()
        sent: list[list[bytes]] = [[] for _ in range(N)]
        for k in range(15):
            for i in range(N):
                p = packet("10.24.0.1", mobile_ip(i), 800, 100 * i + k)
                sent[i].append(p)
                s.btun.peer.send(p)
        got = [s.collect(s.mtuns[i], len(sent[i]), 30) for i in range(N - 1)]
        s.run(0.6)
        st = s.base.status()
        for i in range(N - 1):
            # each present mobile gets its packets in order; one it misses was counted against
            # itself (its own frame's MAX_RT, or its queue's age bound on a busy machine: one
            # of 15 once went missing in a full suite), not held by mobile 3
            assert got[i] == [p for p in sent[i] if p in got[i]], i
            own = st["peers"][i]["sent"]
            missed = len(sent[i]) - len(got[i])
            assert missed <= own["packets_aborted"] + sum(own["queue_drops"].values()), own
        tx, absent = st["tx"], st["peers"][2]
        assert tx["max_rt"] > 0 and tx["packets_aborted"] > 0, tx
        # passed over while the others had packets; its link down, the others' up
        assert absent["sent"]["backoffs"] > 0 and absent["link"] == "down", absent
        assert [p["link"] for p in st["peers"][:2]] == ["up", "up"]


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_mobile_with_another_mobiles_key_gets_nothing_through(
    air_path: str, tmp_path: Path, mode: str
) -> None:
    """Mobile 3 holds mobile 2's key (its own addresses): the base opens its packets with
    mobile 3's key and refuses them all, counted; mobiles 1 and 2 go on. Both link modes."""

    cfgs = [in_mode(mobile_config(tmp_path, air_path, i), mode) for i in range(N - 1)]
    cfgs.append(in_mode(mobile_config(tmp_path, air_path, N - 1, with_key=key(1)), mode))
    base = in_mode(base_config(tmp_path, air_path), mode)
    with star(air_path, tmp_path, cfgs, base) as s:
        thief = [packet(mobile_ip(2), "10.24.0.1", 400, 7000 + k) for k in range(10)]
        honest = [packet(mobile_ip(0), "10.24.0.1", 400, 8000 + k) for k in range(5)]
        for p in thief:
            s.mtuns[2].peer.send(p)
        for p in honest:
            s.mtuns[0].peer.send(p)
        got = s.collect(s.btun, len(honest), 15)
        got += s.collect(s.btun, len(thief), 2)  # (what else comes: nothing of the thief's)
        assert not set(got) & set(thief), "a packet sealed with another mobile's key came in"
        assert set(got) <= set(honest) and len(got) >= len(honest) - 1
        s.run(0.6)
        rx = s.base.status()["rx"]
        # refused, counted (some may meet MAX_RT first): in ESB its packets fail at their first
        # frame's stamp (or the AEAD); in stream mode its ARQ's RESETs fail their tag already
        # (issue 67), so no session begins and none of its frames reach the packet layer
        sec = rx["security"]["drops"]
        refused = sec.get("auth", 0) + sec.get("forged_first", 0)
        if mode == "stream":
            refused = (rx.get("arq") or {}).get("control_forged", 0)
        assert refused > 0, rx
        # The thief hears no grant (they are sealed with the key it lacks) and sends freely:
        # its frames meet mobile 1's, and a packet of mobile 1's that met MAX_RT so (ESB) is
        # counted against mobile 1, never silent
        own = s.mobiles[0].status()["tx"]
        assert len(honest) - len(got) <= own["packets_aborted"] + sum(own["queue_drops"].values())


@pytest.mark.parametrize(
    ("change", "key_named"),
    [
        ({"peers": "duplicate-name"}, "peer.name"),
        ({"peers": "bad-pipe"}, "peer.rx_address"),
        ({"peers": "six"}, "peer"),
        ({"peers": "one-key"}, "peer.key"),
        ({"peers": "old-key"}, "peer.key"),
    ],
)
def test_a_base_with_several_mobiles_is_checked_by_name(
    tmp_path: Path, change: dict[str, object], key_named: str
) -> None:
    cfg = base_config(tmp_path, "/tmp/air.sock")
    peers = list(cfg.peers)
    if change.get("peers") == "duplicate-name":
        peers[1] = replace(peers[1], name=peers[0].name)
        change = {"peers": tuple(peers)}
    elif change.get("peers") == "bad-pipe":
        peers[1] = replace(peers[1], rx_address=b"MGm2c")  # more than the first byte differs
        change = {"peers": tuple(peers)}
    elif change.get("peers") == "six":
        change = {"peers": tuple(peers) + tuple(peers)}
    elif change.get("peers") == "one-key":  # (issue 67: sharing isolates nothing)
        peers[2] = replace(peers[2], key=peers[0].key)
        change = {"peers": tuple(peers)}
    elif change.get("peers") == "old-key":  # (a key being rotated out is a key too)
        peers[1] = replace(peers[1], previous_key=peers[0].key)
        change = {"peers": tuple(peers)}
    with pytest.raises(ConfigError) as err:
        replace(cfg, **change)  # type: ignore[arg-type]
    assert err.value.key == key_named, str(err.value)
    if change != {} and key_named == "peer.key":  # both named, the fix said, the key not
        text = str(err.value)
        assert "mobile1 and mobile" in text and "keygen --out" in text
        assert peers[0].key is not None and peers[0].key.hex() not in text


def test_a_mobile_has_one_peer(tmp_path: Path) -> None:
    cfg = mobile_config(tmp_path, "/tmp/air.sock", 0)
    with pytest.raises(ConfigError) as err:
        replace(cfg, peers=cfg.peers * 2)
    assert err.value.key == "peer" and "base" in str(err.value)


def test_the_config_file_takes_several_peer_tables(tmp_path: Path) -> None:
    from longge import configfile

    cfg = base_config(tmp_path, "/tmp/air.sock")
    for i in range(N):
        f = tmp_path / f"key{i}"
        f.write_text(key(i).hex())
        f.chmod(0o600)
    text = configfile.dumps(cfg, key_file=[str(tmp_path / f"key{i}") for i in range(N)])
    assert text.count("[[peer]]") == N
    path = tmp_path / "base.toml"
    path.write_text(text)
    assert configfile.load(path) == cfg


def test_the_mobiles_take_the_uplink_in_turn(air_path: str, tmp_path: Path) -> None:
    """Three mobiles send at once, with the same retry delay and 2 retries: sent freely their
    frames collide, and collide again on each retry, and packets are lost; with the base
    granting the uplink one mobile at a time they do not. (Margins: a frame may still meet
    another around a grant's edge on a busy machine; at least 90 % of each mobile's packets
    come, in order. Without grants fewer than half came.)"""
    cfgs = [
        replace(mobile_config(tmp_path, air_path, i), radio=RadioOptions(ard_us=250, arc=2))
        for i in range(N)
    ]
    with star(air_path, tmp_path, cfgs) as s:
        assert s.heard(), s.base.status()["rx"]
        sent, got = s.all_send_at_once(30)
        s.run(0.6)  # (the radio processes send their counters every 0.25 s)
        for i in range(N):
            mine = [p for p in got if p in sent[i]]
            tx = s.mobiles[i].status()["tx"]
            assert len(mine) >= 27 and mine == sorted(mine, key=sent[i].index), (
                i,
                len(mine),
                {k: tx.get(k) for k in ("frames_sent", "max_rt", "packets_aborted", "uplink")},
                s.base.status()["tx"]["uplink"],
            )
        uplink = s.base.status()["tx"]["uplink"]
        assert uplink["grants"] >= N and uplink["releases"] >= 1, uplink
        for m in s.mobiles:
            assert m.status()["tx"]["uplink"]["granted"] == 1
        assert "uplink granted in turn" in node_text(s.base.status())


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_small_packet_for_one_mobile_goes_between_another_mobiles_frames(
    air_path: str, tmp_path: Path, mode: str
) -> None:
    """The base sends mobile 1 a run of 1400-byte packets; small packets for mobile 2 (a
    ping's, a keystroke's) go before the rest of the packet on its way, not after it (ESB),
    or end the burst to mobile 1 on its way (stream mode: their frames go in the next burst,
    not after one or two of mobile 1's, 4 ms each), counted ``cut_in``, each of them, not
    only the first; everything arrives whole and in order."""
    cfgs = [in_mode(mobile_config(tmp_path, air_path, i), mode) for i in range(2)]
    with star(air_path, tmp_path, cfgs, in_mode(base_config(tmp_path, air_path), mode)) as s:
        assert s.heard(), s.base.status()["rx"]
        bulk = [packet("10.24.0.1", mobile_ip(0), 1400, 3000 + k) for k in range(12)]
        for p in bulk:
            s.btun.peer.send(p)
        small = []
        for k in range(5):
            s.run(0.05)  # (bulk on its way)
            small.append(packet("10.24.0.1", mobile_ip(1), 84, 4000 + k))
            s.btun.peer.send(small[-1])
        got = [s.collect(s.mtuns[1], len(small), 20), s.collect(s.mtuns[0], len(bulk), 20)]
        s.run(0.6)  # (the radio processes send their counters every 0.25 s)
        st = s.base.status()
        tx = st["tx"]
        # (more than one: a ping flow once cut in stayed "busy" for good, and only its first
        # packet could; 5 of 5 cut in on a quiet machine, 2 leaves room for a busy one)
        assert tx["cut_in"] >= 2, json.dumps(st)
        for (i, want), have in zip(((1, small), (0, bulk)), got, strict=True):
            # whole and in order; a packet missed is counted against its own mobile (its
            # frame's MAX_RT, its queue's bound on a busy machine), never silent
            assert have == [p for p in want if p in have], i
            own = st["peers"][i]["sent"]
            assert len(want) - len(have) <= own["packets_aborted"] + sum(
                own["queue_drops"].values()
            ), own


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_restarted_mobile_waits_for_a_grant_before_it_sends(
    air_path: str, tmp_path: Path, mode: str
) -> None:
    """A mobile remembers (a marker in its state directory) that its base grants the uplink:
    restarted, it sends nothing until a grant comes (before, it sent freely till its first
    grant, into the frames of the mobile that held the uplink), for uplink.FREE_AFTER_S at
    most: here the base is gone, so after that it sends freely and forgets."""
    from longge.protocol.uplink import FREE_AFTER_S

    cfgs = [in_mode(mobile_config(tmp_path, air_path, i), mode) for i in range(2)]
    marker = Path(cfgs[1].state_dir) / f"{cfgs[1].tun}.{mobile_ip(1)}-10.24.0.1.granted"
    with star(air_path, tmp_path, cfgs, in_mode(base_config(tmp_path, air_path), mode)) as s:
        assert s.heard(), s.base.status()["rx"]
        s.run(0.5)
        assert marker.exists()
        s.base.shutdown()
        s.mobiles[1].shutdown()
        tun = MemoryTun("m1-again")
        again = Supervisor(cfgs[1], tun, network=False)
        again.start()
        s.mobiles[1], s.mtuns[1] = again, tun
        start = time.monotonic()
        tun.peer.send(packet(mobile_ip(1), "10.24.0.1", 300, 1))  # (it would go at once)

        def frames_sent() -> int | None:
            tx = again.status().get("tx") or {}
            return tx.get("frames_sent")

        while frames_sent() is None and time.monotonic() - start < 1.0:
            s.run(0.05)  # (till its TX process has told its counters)
        s.run(max(0.0, start + FREE_AFTER_S - 1.0 - time.monotonic()))
        assert frames_sent() == 0, again.status()["tx"]
        s.run(max(0.0, start + FREE_AFTER_S + 1.5 - time.monotonic()))
        assert (frames_sent() or 0) > 0, again.status()["tx"]  # no grant came: free
        assert not marker.exists()
