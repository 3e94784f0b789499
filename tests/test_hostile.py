"""A hostile radio on the link's channel and address, while real traffic flows: it records
frames, then injects random frames, replays what it recorded, forges packets with a wrong key
and sends plain (unsealed) packets. Nothing it sends may reach the base's TUN, the link must
keep working, and the receiving process's memory must stay bounded. In both link modes: in
stream mode the attacker also speaks the ARQ (its frames carry sequence bytes, its radio sends
without acknowledgements, as the link's do).

The daemons are the real ones (supervisor, radio processes) over in-memory TUNs and the
emulated air; the attacker is two more emulated radios, as an attacker would have two more
nRF24L01+ modules."""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemonlink import Link, ip_packet, make_link

from longge.protocol import Fragmenter
from longge.protocol.frame import FIRST, LAST
from longge.protocol.secure import OVERHEAD, Sealer, direction_key, generate_key
from longge.radio.options import RadioOptions, configure
from longge.radio.sim import SimRadio

RADIOS = {"esb": RadioOptions(ard_us=1000, arc=15), "stream": RadioOptions(mode="stream")}
UPLINK_CHANNEL, BASE_RX_ADDRESS = 76, b"LGm2b"  # what a channel scan and a sniffer reveal


@pytest.fixture(params=sorted(RADIOS))
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def link(air_path: str, tmp_path: Path, mode: str) -> Iterator[Link]:
    with make_link(air_path, str(tmp_path), RADIOS[mode]) as lk:
        yield lk


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


#: Frames per second the attacker injects: about a quarter of what the air carries at 2 Mbit/s.
ATTACK_FPS = 500


class Attacker(threading.Thread):
    def __init__(self, air: str, sniff_s: float, attack_s: float, mode: str = "esb") -> None:
        super().__init__(daemon=True)
        self.air, self.sniff_s, self.attack_s = air, sniff_s, attack_s
        self.radio = RADIOS[mode]
        self.arq = 1 if mode == "stream" else 0  # the ARQ byte in front of a stream frame
        self.recorded: list[bytes] = []
        self.injected: Counter[str] = Counter()
        self.error: BaseException | None = None
        self.attacking = threading.Event()

    def _radio(self, name: str) -> SimRadio:
        r = SimRadio(air=self.air, name=name)
        assert r.begin()
        configure(r, self.radio, channel=UPLINK_CHANNEL)
        r.set_retries(3, 2)  # the attacker does not wait long for ACKs
        return r

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _run(self) -> None:
        ear = self._radio("eve-ear")
        ear.set_auto_ack(False)  # listen without answering: invisible
        ear.open_rx_pipe(1, BASE_RX_ADDRESS)
        ear.start_listening()
        mouth = self._radio("eve-mouth")
        mouth.stop_listening(BASE_RX_ADDRESS)
        end = time.monotonic() + self.sniff_s
        while time.monotonic() < end:
            ear.wait(0.02)
            while ear.available():
                self.recorded.append(bytes(ear.read()))
        packets = self._recorded_packets()
        assert packets, "the sniffer caught no whole packet"
        rng = random.Random(1)
        wrong = direction_key(bytes.fromhex(generate_key()), "10.24.0.2", "10.24.0.1")
        epochs = itertools.count(1)
        forger = Sealer(wrong, lambda _at_least: next(epochs))
        fragmenter = Fragmenter(32 - self.arq, 1500 + OVERHEAD)

        def framed(frames: list[bytes]) -> list[bytes]:
            """Stream mode: behind consecutive sequence numbers after the last one sniffed
            (an attacker that follows the link's numbers does more harm: docs/design.md §4)."""
            if not self.arq:
                return frames
            start = self.recorded[-1][0] + 1 + rng.randrange(40) if self.recorded else 0
            return [bytes(((start + i) % 128,)) + f for i, f in enumerate(frames)]

        self.attacking.set()
        start = time.monotonic()
        end = start + self.attack_s
        for kind in itertools.cycle(("random", "replay", "forged", "plain")):
            now = time.monotonic()
            if now >= end:
                break
            # A defined attack load, ATTACK_FPS, not as fast as this machine lets the thread
            # write: flat out it took from a quarter to nearly half of the air depending on
            # the CPU, and what got through during the attack went with it (100 .. 0 of 190).
            ahead = start + sum(self.injected.values()) / ATTACK_FPS - now
            if ahead > 0:
                time.sleep(ahead)
            if kind == "random":
                frames = [rng.randbytes(rng.randint(1, 32)) for _ in range(4)]
            elif kind == "replay":
                frames = rng.choice(packets)
            elif kind == "forged":
                packet = forger.seal(
                    ip_packet(120, rng.randrange(1 << 16)), fragmenter.number_for()
                )
                frames = framed(fragmenter.fragment(packet))
            else:
                frames = framed(fragmenter.fragment(ip_packet(120, rng.randrange(1 << 16))))
            for f in frames:
                mouth.write(f)
                self.injected[kind] += 1
        ear.close()
        mouth.close()

    def _recorded_packets(self) -> list[list[bytes]]:
        """Recorded frames grouped into whole packets (FIRST ... LAST)."""
        out, cur = [], []
        h = self.arq  # the LongGe header's place
        for f in self.recorded:
            if len(f) > h and f[h] & FIRST:
                cur = []
            cur.append(f)
            if len(f) > h and f[h] & LAST and len(cur[0]) > h and cur[0][h] & FIRST:
                out.append(cur)
                cur = []
        return out


def test_nothing_the_hostile_radio_sends_reaches_the_tun(
    link: Link, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rx_pid = link.base.workers[1].proc.pid  # type: ignore[union-attr]
    rss_before = rss_kib(rx_pid)
    eve = Attacker(link.air, sniff_s=2.0, attack_s=6.0, mode=mode)
    eve.start()
    genuine: dict[bytes, int] = {}
    got: list[bytes] = []
    during_sent = during_got = 0

    def collect(until: float) -> None:
        got.extend(link.collect(link.btun, until - time.monotonic()))

    tag = 0
    while eve.is_alive():
        tag += 1
        p = ip_packet(200, tag)
        genuine[p] = tag
        attacking = eve.attacking.is_set()
        link.mtun.peer.send(p)
        n = len(got)
        collect(time.monotonic() + 0.03)
        if attacking:
            during_sent += 1
            during_got += len(got) - n
    assert eve.error is None, eve.error
    # After the attack: the link works as before, every packet through; in stream mode after
    # the first 96 frames, which what the attack left behind may spoil (below): two packets
    # of 48 frames (1400 bytes, sealed, 30 bytes a frame) carry them.
    first = [ip_packet(1400, 40_000 + i) for i in range(2)]
    after = [ip_packet(300, 50_000 + i) for i in range(20)]
    for p in first + after:
        genuine[p] = -1
        link.mtun.peer.send(p)
    deadline = time.monotonic() + 5
    while not set(after) <= set(got) and time.monotonic() < deadline:
        collect(time.monotonic() + 0.05)
    collect(time.monotonic() + 1.2)  # let the RX process report its counters
    rx = link.base.status()["rx"]
    rss_after = rss_kib(rx_pid)
    injected = sum(eve.injected.values())
    through = f"{len(set(first) & set(got))}/2, then {len(set(after) & set(got))}/20"
    with capsys.disabled():
        print(
            f"\nhostile radio: recorded {len(eve.recorded)} frames; injected {injected} "
            f"({dict(eve.injected)}); genuine during the attack {during_got}/{during_sent} "
            f"delivered; after it {through}; "
            f"base RX drops {rx['drops']}, security {rx['security']}; "
            f"RX process RSS {rss_before} -> {rss_after} KiB"
        )
    # 1. nothing forged, replayed or plain reached the TUN; nothing genuine twice
    assert all(p in genuine for p in got), "a packet the mobile never sent was delivered"
    assert len(got) == len(set(got)), "a packet was delivered twice (replay)"
    # 2. each attack was seen and refused by its check (in stream mode most injected frames
    # end at the ARQ, as duplicates or outside its window, or at the reassembler: what comes
    # through to the security check is a matter of chance, and is refused there)
    sec = rx["security"]["drops"]
    if mode == "esb":  # (refused at their first frames: secure.py, "First frames")
        assert sec.get("replayed_first", 0) > 0 and sec.get("forged_first", 0) > 0
        assert rx["drops"].get("refused_first", 0) >= sec["replayed_first"] + sec["forged_first"]
    else:
        arq = rx["arq"]
        assert arq.get("duplicates", 0) + arq.get("out_of_window", 0) > 0
        assert sum(rx["drops"].values()) > 0
    assert rx["drops"].get("rejected", 0) == sec.get("replay", 0) + sec.get("auth", 0) + sec.get(
        "short", 0
    )
    assert eve.injected["random"] > 0 and eve.injected["plain"] > 0
    # 3. the link kept working during and after the attack
    assert during_got > 0
    if mode == "esb":
        assert set(first) <= set(got)  # (no ARQ: nothing the attacker sent is left to spoil)
    # In stream mode the ARQ's sequence numbers are not authenticated: frames the attacker
    # injected are taken for the sender's, and what is left of them when it stops spoils at
    # most the first 96 frames sent after it. (1) Injected frames the receiver delivered left
    # it d places ahead of the sender: the sender's next min(d, 48) frames count as delivered,
    # or are given up when it skips ahead (at most its window in flight: 48); pushed more
    # than 64 places ahead, the sender's timeouts begin a new session instead, which loses
    # nothing. (2) Injected frames the receiver holds in its window (the 47 places after the
    # one it expects) are delivered instead of the genuine frames there: within the next 48.
    # (Seen, before the two packets went first: the second and third 300-byte packets after
    # the attack lost, 3 runs in 4.) Every packet after those 96 frames arrives, in order.
    assert [p for p in got if p in after] == after
    # 4. bounded memory (one packet buffer, a 64-bit replay window)
    assert rss_after - rss_before < 8 * 1024, "RX process grew by more than 8 MiB"
    assert os.path.exists(link.base.cfg.state_dir)
