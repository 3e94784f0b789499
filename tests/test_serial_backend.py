"""The USB radio modem: its firmware (firmware/) built for the AVR and natively; the native build
runs the real firmware logic with a model of the chip's registers attached to the air emulator,
on a pseudo-terminal, so the daemon runs end to end over the serial backend here. The host
protocol parser is fuzzed (in C through ctypes, and the whole modem over its terminal)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemonlink import ip_packet, make_link
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longge.air.wire import query
from longge.errors import HardwareError
from longge.modembench import make_firmware
from longge.radio.options import RadioOptions, configure
from longge.radio.serial_modem import SerialRadio, config_record, crc16, frame, unframe
from longge.radio.sim import SimRadio

ROOT = Path(__file__).resolve().parents[1]
FIRMWARE = ROOT / "firmware"
BUILD = FIRMWARE / "build"

if shutil.which("cc") is None or shutil.which("make") is None:
    if os.environ.get("CI"):
        pytest.fail("the modem tests must run on CI: no C compiler/make", pytrace=False)
    pytest.skip(
        "no C compiler or make: ./run.sh installs them when run as root", allow_module_level=True
    )


@pytest.fixture(scope="module")
def native() -> Path:
    r = make_firmware("native")  # (locked: the other worker's testbed may make it too)
    assert r.returncode == 0, r.stdout + r.stderr
    return BUILD


class Modem:
    """One native modem process: the firmware on a pseudo-terminal, its chip on the air."""

    def __init__(
        self,
        build: Path,
        air: str,
        name: str,
        link: Path,
        baud: int = 2_000_000,
        chip: str = "plus",
    ) -> None:
        self.args = [str(build / "modem-native"), air, name, str(link), str(baud)]
        self.link = link
        self.env = {**os.environ, "LONGGE_CHIP": chip}
        self.proc: subprocess.Popen[str] | None = None
        self.reports: list[str] = []  # stderr of every run that ended
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("pty "), line + (self.proc.stderr.read() if self.proc.stderr else "")

    def stop(self) -> str:
        assert self.proc is not None
        died = self.proc.poll()  # already gone on its own: a crash, whatever it printed
        if died is None:
            self.proc.terminate()
        _, err = self.proc.communicate(timeout=10)
        if died is not None:
            err += f"\n(the modem exited by itself with status {died})"
        self.reports.append(err)
        return err

    def clean(self) -> None:
        """Stop it if it runs; fail on any sanitizer report or crash of any of its runs."""
        if self.proc is not None and self.proc.returncode is None:
            self.stop()
        for err in self.reports:
            bad = "Sanitizer" in err or "runtime error" in err or "exited by itself" in err
            assert not bad, err

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@pytest.fixture
def modems(native: Path, air_path: str, tmp_path: Path) -> Iterator[tuple[Modem, Modem]]:
    tx = Modem(native, air_path, "mobile-tx", tmp_path / "tx.pty")
    rx = Modem(native, air_path, "mobile-rx", tmp_path / "rx.pty")
    try:
        yield tx, rx
    finally:
        for m in (tx, rx):
            m.clean()


def test_the_avr_image_builds_and_fits(tmp_path: Path) -> None:
    if shutil.which("avr-gcc") is None:
        if os.environ.get("CI"):
            pytest.fail("avr-gcc missing on CI (./run.sh installs gcc-avr as root)")
        pytest.skip("avr-gcc not installed (Debian: gcc-avr avr-libc binutils-avr)")
    r = subprocess.run(
        ["make", "-C", str(FIRMWARE), "avr", f"BUILD={tmp_path}"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("longge-modem"))
    print(line)
    flash_pct = float(line.split("(")[2].split("%")[0])
    ram_pct = float(line.split("(")[3].split("%")[0])
    # margin on an ATmega328P; the stack comes on top of this RAM: tests/test_modem_avr.py
    # measures its high-water mark on the simulated chip
    assert flash_pct < 50 and ram_pct < 60, line
    assert (tmp_path / "longge-modem.hex").stat().st_size > 1000


def test_frames_cross_the_modem_both_ways_and_it_reports_itself(
    modems: tuple[Modem, Modem], air_path: str
) -> None:
    tx_modem, _ = modems
    tx = SerialRadio(str(tx_modem.link), name="mobile-tx")
    header = (FIRMWARE / "src" / "modem.h").read_text()
    version = tuple(
        int(re.search(rf"MODEM_VERSION_{part} (\d+)", header).group(1))  # type: ignore[union-attr]
        for part in ("MAJOR", "MINOR")
    )
    assert tx.begin() and tx.firmware == version
    assert tx.serial.max_unread == 6  # 1.1's 256-byte ring: the host sends no more unread
    configure(tx, RadioOptions(), channel=76)
    tx.stop_listening(b"LGm2b")
    rx = SimRadio(air=air_path, name="peer")
    assert rx.begin()
    configure(rx, RadioOptions(), channel=76)
    rx.open_rx_pipe(1, b"LGm2b")
    rx.start_listening()
    sent = [bytes([i]) * (1 + i % 32) for i in range(100)]
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    for p in sent:
        while rx.available():  # the peer reads as it goes: a full RX FIFO is not acked
            got.append(bytes(rx.read()))
        while tx.is_fifo(True) == 2 and time.monotonic() < deadline:
            tx.wait(0.005)
            while rx.available():
                got.append(bytes(rx.read()))
        assert tx.what_happened()[1] is False, "MAX_RT: the peer did not acknowledge"
        # room by is_fifo is room by STATUS's TX_FULL too (the modem's line holds fewer
        # payloads than its queue: the sender loads with start_fast_write once it sees room)
        assert (tx.is_fifo(True) == 2) == bool(tx.get_status_flags() & 1)
        assert tx.write_fast(p)
    deadline = time.monotonic() + 5
    while len(got) < len(sent) and time.monotonic() < deadline:
        rx.wait(0.05)
        while rx.available():
            got.append(bytes(rx.read()))
    assert got == sent
    stats = tx.stats()
    assert stats is not None and stats["frames_ok"] >= 100 and stats["bad_crc"] == 0
    tx.close()
    rx.close()


def test_a_modem_hears_three_senders_each_on_its_own_pipe(
    modems: tuple[Modem, Modem], air_path: str
) -> None:
    """Firmware 1.2's 33-byte record: pipes 2..5 with their own first byte (pipe 1's other
    bytes), so a base on modems can serve several mobiles; each frame is read with its pipe.
    (Firmware 1.1 refused pipes 2..5: a base on modems heard one mobile.)"""
    from longge.testbed_spec import base_listens

    _, rx_modem = modems
    rx = SerialRadio(str(rx_modem.link), name="base-rx")
    assert rx.begin()
    configure(rx, RadioOptions(), channel=76)
    for i in range(3):
        rx.open_rx_pipe(i + 1, base_listens(i))
    rx.start_listening()
    got: list[tuple[int, bytes]] = []
    for i in range(3):
        tx = SimRadio(air=air_path, name=f"mobile{i}")
        assert tx.begin()
        configure(tx, RadioOptions(), channel=76)
        tx.stop_listening(base_listens(i))
        deadline = time.monotonic() + 5  # (the modem takes its settings over the line first)
        while not tx.write(bytes([i, 0])) and time.monotonic() < deadline:
            time.sleep(0.05)
        for k in range(1, 5):
            assert tx.write(bytes([i, k])), (i, k)  # (acknowledged: the pipe is open)
        tx.close()
        deadline = time.monotonic() + 5
        while len(got) < 5 * (i + 1) and time.monotonic() < deadline:
            rx.wait(0.05)
            while (has := rx.available_pipe())[0]:
                got.append((has[1], bytes(rx.read())))
    assert got == [(i + 1, bytes([i, k])) for i in range(3) for k in range(5)]
    rx.close()


def test_pipes_past_1_need_firmware_1_2_and_the_host_says_so() -> None:
    """The 29-byte record while pipes 0 and 1 only are open (any firmware takes it); with a
    pipe past 1, the 33-byte one, and a modem older than 1.2 is told to be flashed."""
    from longge.chip.registers import RadioRegisters
    from longge.radio.serial_modem import CONFIG_LEN, CONFIG_LEN_PIPES, SerialLink

    regs = RadioRegisters()
    regs.rx_pipes = {0: b"LGb2m", 1: b"LGm2b"}
    assert len(config_record(regs)) == CONFIG_LEN
    regs.rx_pipes = {**regs.rx_pipes, 3: b"NGm2b"}
    record = config_record(regs)
    assert len(record) == CONFIG_LEN_PIPES and record[17] == 0b1011
    assert record[29:] == bytes((0xC3, ord("N"), 0xC5, 0xC6))  # (closed pipes: power-on bytes)
    link = SerialLink("/nonexistent", 2_000_000, "base-rx")
    link.firmware = (1, 1)
    with pytest.raises(HardwareError, match=r"firmware 1\.2"):
        link.registers_message(regs)
    link.firmware = (1, 2)
    assert link.registers_message(regs) == b"C" + record


def test_wrong_port_and_wrong_device_are_explained(tmp_path: Path) -> None:
    with pytest.raises(HardwareError, match="cannot open the modem"):
        SerialRadio(str(tmp_path / "nothing"), name="tx").begin()


def test_a_device_whose_version_reply_is_short_or_absurd_is_no_modem() -> None:
    """A device on the line that answers V with a well-framed but short reply (once: an
    unpacking ValueError that killed the radio process) or a queue deeper than any modem's."""
    import threading

    for answer in (b"v\x01", b"v\x01\x01\x01\x01\xff"):
        master, slave = os.openpty()

        def answer_once(fd: int = master, reply: bytes = frame(answer)) -> None:
            got = b""
            while b"\x00" not in got:  # the V request's frame
                got += os.read(fd, 256)
            os.write(fd, reply)

        t = threading.Thread(target=answer_once, daemon=True)
        t.start()
        try:
            with pytest.raises(HardwareError, match="not a LongGe modem"):
                SerialRadio(os.ttyname(slave), name="tx").begin()
        finally:
            t.join(2)
            os.close(master)
            os.close(slave)


def test_the_daemon_runs_end_to_end_over_the_serial_backend(
    modems: tuple[Modem, Modem], air_path: str, tmp_path: Path
) -> None:
    tx, rx = modems
    extra = {"backend": "serial", "tx_port": str(tx.link), "rx_port": str(rx.link)}
    with make_link(air_path, str(tmp_path), mobile_extra=extra) as link:
        up = [ip_packet(40 + 97 * i, i) for i in range(15)]
        assert link.send(link.mtun, up, to=link.btun) == up
        down = [ip_packet(1400, 100 + i) for i in range(5)]
        assert link.send(link.btun, down, to=link.mtun) == down
        st = link.mobile.status()
        assert st["radio"]["backend"] == "serial" and st["tx"]["state"] == "up"
        # Unplug the TX modem and plug it back: the daemon takes it up again by itself.
        tx.stop()
        noticed = ""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not noticed:
            link.pump(0.1)
            state = link.mobile.status()["tx"].get("state", "")
            noticed = state if state != "up" else ""
        assert noticed, "the daemon did not notice the TX modem was unplugged"
        tx.start()
        deadline = time.monotonic() + 10
        again = [ip_packet(200, 500)]
        while time.monotonic() < deadline:
            if link.send(link.mtun, again, to=link.btun, timeout=1.0) == again:
                break
        else:
            pytest.fail("the link did not come back after the modem was plugged in again")
        assert link.mobile.status()["processes"]["tx"]["alive"]
        assert link.mobile.status()["tx"]["state"] == "up", "back, but not shown as up"
        print(f"unplugged: TX state {noticed!r}, then up again")


# -- the host protocol parser, fuzzed ---------------------------------------------------------


class ParserProcess:
    """The firmware's parser (src/proto.c) in a sanitized process (firmware/build/proto-fuzz):
    streams in, messages and counters out. A sanitizer report, or a crash, ends the process,
    and feed() fails with what it printed."""

    def __init__(self, build: Path) -> None:
        self.proc = subprocess.Popen(
            [str(build / "proto-fuzz")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def feed(self, data: bytes) -> tuple[list[bytes], dict[str, int]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(len(data).to_bytes(2, "big") + data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        got: list[bytes] = []
        counters: dict[str, int] = {}
        while True:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                pytest.fail(f"the parser died (status {self.proc.wait()}):\n{err[-3000:]}")
            if line.startswith(b"m "):
                got.append(bytes.fromhex(line[2:].decode()))
            elif line.startswith(b"c "):
                names = ("frames_ok", "bad_crc", "bad_cobs", "too_long", "too_short")
                counters = dict(zip(names, map(int, line.split()[1:]), strict=True))
            elif line.strip() == b".":
                return got, counters

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        err = self.proc.stderr.read().decode(errors="replace")
        assert self.proc.wait(10) == 0, err
        return err


@pytest.fixture(scope="module")
def parser(native: Path) -> Iterator[ParserProcess]:
    p = ParserProcess(native)
    yield p
    err = p.close()
    assert "Sanitizer" not in err and "runtime error" not in err, err


def test_c_and_python_framing_agree(parser: ParserProcess) -> None:
    msgs = [
        b"V",
        b"T\x00" + bytes(32),
        b"C" + config_record(__import__("longge.air.model", fromlist=["x"]).RadioRegisters()),
        b"e\x01" + b"\x00" * 20,
    ]
    got, counters = parser.feed(b"".join(frame(m) for m in msgs))
    assert got == msgs and counters["frames_ok"] == len(msgs)
    assert crc16(b"123456789") == 0x29B1  # CRC-16/CCITT-FALSE check value
    assert all(unframe(frame(m)[:-1]) == m for m in msgs)


#: Decoded message + CRC the firmware takes (PROTO_MAX_MESSAGE), and its longest frame.
MAX_MESSAGE = 40
MAX_FRAME = MAX_MESSAGE + MAX_MESSAGE // 254 + 2


def reference_parser(stream: bytes) -> tuple[list[bytes], int]:
    """What the firmware must make of a byte stream, from the host side's own codec: each
    0x00-delimited, non-empty frame no longer than MAX_FRAME that decodes (COBS, CRC-16) to at
    most MAX_MESSAGE bytes is a message; nothing else is. Returns (messages, frames judged)."""
    out: list[bytes] = []
    segments = [s for s in stream.split(b"\x00")[:-1] if s]  # the tail has no delimiter yet
    for seg in segments:
        msg = unframe(seg) if len(seg) <= MAX_FRAME else None
        if msg is not None and len(msg) + 2 <= MAX_MESSAGE:
            out.append(msg)
    return out, len(segments)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(
    pieces=st.lists(
        st.one_of(
            st.binary(max_size=60).map(lambda b: ("noise", b)),
            st.binary(min_size=1, max_size=37).map(lambda m: ("good", m)),
        ),
        max_size=40,
    )
)
def test_fuzz_the_parser_finds_exactly_the_valid_frames(
    parser: ParserProcess, pieces: list[tuple[str, bytes]]
) -> None:
    """Valid frames hidden in arbitrary bytes: the C parser delivers exactly what the host
    side's codec finds in the same stream (every valid frame, in order, and nothing else), and
    accounts for every other frame by reason. A parser that dropped one valid frame in ten,
    or took a frame with a bad CRC, fails here."""
    stream = b"".join(frame(body) if kind == "good" else body for kind, body in pieces)
    want, judged = reference_parser(stream)
    got, counters = parser.feed(stream)
    assert got == want
    assert counters["frames_ok"] == len(got)
    assert sum(counters.values()) == judged
    # a valid frame right after a delimiter is always among them
    for kind, body in pieces:
        if kind == "good" and (b"\x00" + frame(body)) in b"\x00" + stream:
            assert body in got


def test_a_long_stream_gives_every_valid_frame_once_and_in_order(parser: ParserProcess) -> None:
    """The fuzz examples above rarely hold ten valid frames in one stream, so a parser that
    dropped one in ten passed them in some runs. Here one stream (one parser) carries 80 valid
    frames, each after a delimiter, between garbage: noise with and without zeros, frames with
    a byte changed, cut short, too long to be a frame or to be a message, empty ones. All 80
    come out, once each, in order, and nothing else; the rest is counted by reason."""
    import random

    rng = random.Random(7)  # fixed: the same stream in every run
    goods = [bytes([0x40 + i % 60]) + rng.randbytes(i % 38) for i in range(80)]  # 1..38 bytes
    pieces: list[bytes] = []
    for i, msg in enumerate(goods):
        pieces.append(b"\x00" + frame(msg))  # the 0x00 ends whatever garbage came before
        good = frame(goods[(i * 7) % len(goods)])[:-1]
        garbage = (
            rng.randbytes(rng.randint(1, 50)),  # noise, zeros and all
            bytes(rng.randint(1, 255) for _ in range(rng.randint(1, 30))),  # noise, no end
            good[:3] + bytes([good[3] ^ 0x5A or 1]) + good[4:] + b"\x00",  # a byte changed
            good[: len(good) // 2] + b"\x00",  # cut short
            b"\x07" * (MAX_FRAME + 1) + b"\x00",  # longer than a frame
            frame(b"L" + bytes(38)),  # a valid frame, but a message of 41 bytes with its CRC
            b"\x03AB\x00",  # two bytes: shorter than a type and a CRC
            b"\x00\x00",  # empty frames: resync delimiters
        )
        pieces.append(garbage[i % len(garbage)])
    stream = b"".join(pieces)
    got, counters = parser.feed(stream)
    want, judged = reference_parser(stream)
    assert got == goods == want
    assert counters["frames_ok"] == len(goods)
    assert sum(counters.values()) == judged
    assert all(counters[k] > 0 for k in ("bad_crc", "bad_cobs", "too_long", "too_short"))


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
@given(noise=st.lists(st.binary(min_size=1, max_size=80), min_size=1, max_size=6))
def test_fuzz_the_modem_over_its_terminal(modems: tuple[Modem, Modem], noise: list[bytes]) -> None:
    """Garbage and malformed-but-framed requests at the running modem: it answers errors, never
    hangs or crashes (AddressSanitizer and UBSan watch it), and still answers after."""
    tx_modem, _ = modems
    radio = SerialRadio(str(tx_modem.link), name="fuzz")
    assert radio.begin()
    for chunk in noise:
        radio.serial.write_raw(chunk)  # raw garbage
        radio.serial.write_raw(frame(chunk[:37]))  # well framed, nonsense inside
    radio.serial.write_raw(b"\x00")
    assert radio.stats() is not None, "the modem stopped answering"
    assert tx_modem.alive()
    radio.close()


# -- the modem's command layer (firmware/src/modem.c, radio.c) ------------------------------

E_UNKNOWN, E_ARGS, E_FIFO, E_CONFIG, E_NO_CHIP = 1, 2, 3, 4, 5


class Wire:
    """The host side of the modem's protocol at its lowest: frames out, messages in."""

    def __init__(self, link: Path) -> None:
        import tty

        self.fd = os.open(str(link), os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.fd)
        self.buf = b""

    def ask(self, msg: bytes, want: int = 1, timeout: float = 3.0) -> list[bytes]:
        """Send one message; return the next ``want`` messages the modem sends back."""
        import select

        os.write(self.fd, b"\x00" + frame(msg))
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            while b"\x00" in self.buf and len(got) < want:
                raw, _, self.buf = self.buf.partition(b"\x00")
                m = unframe(raw) if raw else None
                if m is not None and m[:1] not in (b"t", b"r"):  # radio news: not replies
                    got.append(m)
            if len(got) < want and select.select([self.fd], [], [], 0.05)[0]:
                self.buf += os.read(self.fd, 4096)
        return got

    def close(self) -> None:
        os.close(self.fd)


@contextlib.contextmanager
def wired(native: Path, air: str, tmp_path: Path, chip: str = "plus") -> Iterator[Wire]:
    """A modem with that chip, and the host's end of its wire; checked for sanitizer reports
    and crashes when done."""
    modem = Modem(native, air, chip, tmp_path / f"{chip}.pty", chip=chip)
    wire = Wire(modem.link)
    try:
        yield wire
    finally:
        wire.close()
        modem.clean()


def _config(**over: int) -> bytes:
    from longge.air.model import RadioRegisters

    regs = RadioRegisters(rate="2M", dynamic_payloads=True, arc=15, ard_step=15)
    regs.tx_address, regs.rx_pipes = b"LGxyz", {1: b"LGxyz"}
    rec = bytearray(config_record(regs))
    fields = ["channel", "rate", "pa", "aw", "crc", "ard", "arc", "auto_ack", "dpl", "dyn_ack"]
    fields += ["payload", "powered"]
    for key, value in over.items():
        index = {**{f: i for i, f in enumerate(fields)}, "pipes": 17, "last": 28}[key]
        rec[index] = value
    return bytes(rec)


def _error(reply: list[bytes]) -> int | None:
    return reply[0][1] if reply and reply[0][:1] == b"e" else None


@pytest.mark.parametrize(
    "bad",
    [
        {"channel": 126},
        {"rate": 3},
        {"pa": 4},
        {"aw": 2},
        {"aw": 6},
        {"crc": 0},
        {"crc": 3},
        {"ard": 16},
        {"arc": 16},
        {"auto_ack": 0x40},
        {"pipes": 0x04},
        {"payload": 0},
        {"payload": 33},
        {"dpl": 2},
        {"powered": 2},
        {"last": 1},
    ],
)
def test_the_modem_refuses_each_bad_setting(
    native: Path, air_path: str, tmp_path: Path, bad: dict[str, int]
) -> None:
    with wired(native, air_path, tmp_path) as wire:
        assert wire.ask(b"C" + _config())[0] == b"c\x00"  # the good record is taken
        assert _error(wire.ask(b"C" + _config(**bad))) == E_CONFIG
        assert _error(wire.ask(b"C" + _config()[:-1])) == E_CONFIG  # wrong length


def test_the_modem_refuses_bad_requests_and_a_full_queue(
    native: Path, air_path: str, tmp_path: Path
) -> None:
    with wired(native, air_path, tmp_path) as wire:
        version = wire.ask(b"V")[0]
        assert version[:1] == b"v" and version[3] == 1 and version[4] == 1  # chip found, a "+"
        depth = version[5]  # the chip's FIFO and the modem's queue in front of it
        assert _error(wire.ask(b"Zxx")) == E_UNKNOWN
        assert _error(wire.ask(b"L\x02")) == E_ARGS
        assert _error(wire.ask(b"L")) == E_ARGS
        assert _error(wire.ask(b"T\x00" + bytes(33))) == E_ARGS
        assert _error(wire.ask(b"T\x00")) == E_ARGS
        assert wire.ask(b"C" + _config())[0] == b"c\x00"  # nobody listens: ARD 4 ms, ARC 15
        os.write(wire.fd, b"".join(frame(b"T\x00" + bytes([i]) * 8) for i in range(depth)))
        assert _error(wire.ask(b"T\x00" + b"x" * 8)) == E_FIFO  # one more than it can hold


def test_an_old_chip_is_refused_250k_and_no_chip_is_reported(
    native: Path, air_path: str, tmp_path: Path
) -> None:
    with wired(native, air_path, tmp_path, chip="old") as wire:
        version = wire.ask(b"V")[0]
        assert version[3] == 1 and version[4] == 0  # a chip, not a "+"
        assert wire.ask(b"C" + _config())[0] == b"c\x00"  # 2 Mbit/s: fine
        reply = wire.ask(b"C" + _config(rate=2))  # 250 kbit/s (rate code 2)
        assert _error(reply) == E_CONFIG and b"250k" in reply[0]
    with wired(native, air_path, tmp_path, chip="absent") as wire:
        assert wire.ask(b"V")[0][3] == 0  # no chip on SPI
        assert _error(wire.ask(b"C" + _config())) == E_NO_CHIP
        assert _error(wire.ask(b"T\x00abc")) == E_NO_CHIP


def test_begin_names_what_to_check_for_a_modem_without_a_chip_or_with_an_old_one(
    native: Path, air_path: str, tmp_path: Path
) -> None:
    """Each diagnosis begin() and verify() give, from a modem that really behaves that way."""
    absent = Modem(native, air_path, "absent", tmp_path / "absent.pty", chip="absent")
    try:
        with pytest.raises(HardwareError, match="no nRF24L01\\+ answers on its SPI bus"):
            SerialRadio(str(absent.link), name="mobile-tx").begin()
    finally:
        absent.clean()
    old = Modem(native, air_path, "old", tmp_path / "old.pty", chip="old")
    try:
        radio = SerialRadio(str(old.link), name="mobile-tx")
        assert radio.begin() and radio.is_plus_variant is False
        configure(radio, RadioOptions(rate="250k", ard_us=500), channel=76)
        with pytest.raises(HardwareError, match="250"):
            radio.verify(RadioOptions(rate="250k", ard_us=500), 76, 0)
        radio.close()
    finally:
        old.clean()


def test_the_modem_keeps_the_4ms_rule_itself_in_no_ack_mode(
    modems: tuple[Modem, Modem], air_path: str
) -> None:
    """Stream mode through a modem whose host keeps its queue full and never lets it drain:
    the firmware itself stops loading the chip after a 4 ms burst until the FIFO has drained
    (nRF24L01+ Product Specification §6.1.5), so the air counts no stay in TX mode over 4 ms.
    At 250 kbit/s, where the serial line brings frames far faster than the air takes them (a
    4 ms stay holds 3 frames), so the modem's queue is full and only the rule ends a stay."""
    tx_modem, _ = modems
    stream = RadioOptions(rate="250k", mode="stream")
    tx = SerialRadio(str(tx_modem.link), name="mobile-tx")
    assert tx.begin()
    configure(tx, stream, channel=76)
    tx.stop_listening(b"LGm2b")
    rx = SimRadio(air=air_path, name="peer")
    assert rx.begin()
    configure(rx, stream, channel=76)
    rx.open_rx_pipe(1, b"LGm2b")
    rx.start_listening()
    sent = [bytes([i % 256]) * 32 for i in range(300)]
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    for p in sent:
        while tx.is_fifo(True) == 2 and time.monotonic() < deadline:  # the queue alone decides
            tx.wait(0.001)
            while rx.available():
                got.append(bytes(rx.read()))
        assert tx.write_fast(p)
        while rx.available():
            got.append(bytes(rx.read()))
    deadline = time.monotonic() + 5
    while len(got) < len(sent) and time.monotonic() < deadline:
        rx.wait(0.05)
        while rx.available():
            got.append(bytes(rx.read()))
    radio = query(air_path)["air"]["radios"]["mobile-tx"]
    assert radio.get("acks_sent", 0) == 0 and radio["frames_ok"] == len(sent)
    assert radio.get("tx_mode_over_4ms", 0) == 0, radio
    # stays of several frames, not one at a time: the modem still streams (3 frames a stay)
    assert radio["settles"] <= len(sent) / 2, radio
    assert got == sent[: len(got)] and len(got) > len(sent) // 2
    tx.close()
    rx.close()
