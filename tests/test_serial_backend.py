"""The USB radio modem: its firmware (firmware/) built for the AVR and natively; the native build
runs the real firmware logic with a model of the chip's registers attached to the air emulator,
on a pseudo-terminal, so the daemon runs end to end over the serial backend here. The host
protocol parser is fuzzed (in C through ctypes, and the whole modem over its terminal)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemonlink import ip_packet, make_link
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longge.errors import HardwareError
from longge.radio.options import RadioOptions, configure
from longge.radio.serial_modem import SerialRadio, config_record, frame, unframe
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
    r = subprocess.run(["make", "-C", str(FIRMWARE), "native"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return BUILD


class Modem:
    """One native modem process: the firmware on a pseudo-terminal, its chip on the air."""

    def __init__(self, build: Path, air: str, name: str, link: Path, baud: int = 2_000_000) -> None:
        self.args = [str(build / "modem-native"), air, name, str(link), str(baud)]
        self.link = link
        self.proc: subprocess.Popen[str] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("pty "), line + (self.proc.stderr.read() if self.proc.stderr else "")

    def stop(self) -> str:
        assert self.proc is not None
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=10)
        return err

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
            if m.alive():
                err = m.stop()
                assert "Sanitizer" not in err and "runtime error" not in err, err


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
    assert flash_pct < 50 and ram_pct < 50, line  # margin on an ATmega328P
    assert (tmp_path / "longge-modem.hex").stat().st_size > 1000


def test_frames_cross_the_modem_both_ways_and_it_reports_itself(
    modems: tuple[Modem, Modem], air_path: str
) -> None:
    tx_modem, _ = modems
    tx = SerialRadio(str(tx_modem.link), name="mobile-tx")
    assert tx.begin() and tx.firmware == (1, 0)
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


def test_wrong_port_and_wrong_device_are_explained(tmp_path: Path) -> None:
    with pytest.raises(HardwareError, match="cannot open the modem"):
        SerialRadio(str(tmp_path / "nothing"), name="tx").begin()


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
        link.pump(0.5)
        tx.start()
        deadline = time.monotonic() + 10
        again = [ip_packet(200, 500)]
        while time.monotonic() < deadline:
            if link.send(link.mtun, again, to=link.btun, timeout=1.0) == again:
                break
        else:
            pytest.fail("the link did not come back after the modem was plugged in again")
        assert link.mobile.status()["processes"]["tx"]["alive"]


# -- the host protocol parser, fuzzed ---------------------------------------------------------

HANDLER = ctypes.CFUNCTYPE(
    None, ctypes.c_uint8, ctypes.POINTER(ctypes.c_uint8), ctypes.c_uint8, ctypes.c_void_p
)


class Parser(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_uint8 * 42),
        ("len", ctypes.c_uint8),
        ("overflow", ctypes.c_uint8),
        ("frames_ok", ctypes.c_uint32),
        ("bad_crc", ctypes.c_uint32),
        ("bad_cobs", ctypes.c_uint32),
        ("too_long", ctypes.c_uint32),
        ("too_short", ctypes.c_uint32),
    ]


@pytest.fixture(scope="module")
def lib(native: Path) -> ctypes.CDLL:
    so = ctypes.CDLL(str(native / "libproto.so"))
    so.proto_feed.argtypes = (ctypes.POINTER(Parser), ctypes.c_uint8, HANDLER, ctypes.c_void_p)
    so.proto_crc16.restype = ctypes.c_uint16
    return so


def feed(lib: ctypes.CDLL, data: bytes) -> tuple[list[bytes], Parser]:
    got: list[bytes] = []

    def on(kind: int, body: ctypes._Pointer, n: int, _: object) -> None:  # type: ignore[type-arg]
        got.append(bytes([kind]) + bytes(body[:n]))

    p = Parser()
    lib.proto_parser_init(ctypes.byref(p))
    cb = HANDLER(on)
    for b in data:
        lib.proto_feed(ctypes.byref(p), b, cb, None)
    return got, p


def test_c_and_python_framing_agree(lib: ctypes.CDLL) -> None:
    msgs = [
        b"V",
        b"T\x00" + bytes(32),
        b"C" + config_record(__import__("longge.air.model", fromlist=["x"]).RadioRegisters()),
        b"e\x01" + b"\x00" * 20,
    ]
    got, p = feed(lib, b"".join(frame(m) for m in msgs))
    assert got == msgs and p.frames_ok == len(msgs)
    assert lib.proto_crc16(b"123456789", 9) == 0x29B1  # CRC-16/CCITT-FALSE check value
    assert all(unframe(frame(m)[:-1]) == m for m in msgs)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(
    noise=st.binary(max_size=300),
    good=st.lists(st.binary(min_size=1, max_size=37), max_size=5),
)
def test_fuzz_the_parser_takes_garbage_and_still_finds_good_frames(
    lib: ctypes.CDLL, noise: bytes, good: list[bytes]
) -> None:
    """Arbitrary bytes, then valid frames: no crash, nothing invented, and after a delimiter
    every valid frame is delivered intact."""
    junk, p = feed(lib, noise)
    assert all(unframe(frame(m)[:-1]) == m for m in junk)  # anything it accepted was well-formed
    stream = noise + b"\x00" + b"".join(frame(m) for m in good)
    got, p = feed(lib, stream)
    assert got[len(got) - len(good) :] == good
    assert p.bad_crc + p.bad_cobs + p.too_long + p.too_short + p.frames_ok >= len(good)


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
        radio._serial.write(chunk)  # raw garbage
        radio._serial.write(frame(chunk[:37]))  # well framed, nonsense inside
    radio._serial.write(b"\x00")
    assert radio.stats() is not None, "the modem stopped answering"
    assert tx_modem.alive()
    radio.close()
