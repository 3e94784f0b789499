"""The rf24 backend: every pyrf24 call it (and the daemon through it) makes exists in the
installed pyrf24 with that signature; its checks say what is wrong; and the daemon runs
unchanged with ``backend = "rf24"`` (here over emulated chips: ``[rf24] driver = "sim"``)."""

from __future__ import annotations

import ast
import json
import multiprocessing
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyrf24
import pytest
from daemonlink import Link, ip_packet, make_link
from test_radio_conformance import pyrf24_signatures

from longge import config, configfile
from longge.air.wire import query
from longge.daemon import child
from longge.errors import ConfigError, HardwareError
from longge.radio.interface import RADIO_METHODS, RADIO_PROPERTIES, LinkRadio
from longge.radio.options import RadioOptions, configure
from longge.radio.rf24 import Rf24Radio, spidev
from longge.radio.sim import SimRadio

ROOT = Path(__file__).resolve().parents[1]
#: The names beyond pyrf24's that the daemon uses: LinkRadio's (radio/interface.py).
EXTENSIONS = {n for n in vars(LinkRadio) if not n.startswith("_")} | {"retransmissions"}


def chip_calls(path: Path, receiver: str) -> dict[str, int | None]:
    """{attribute: positional argument count (None if only read/written)} for every
    ``<receiver>.attr`` in a module (receiver: ``self._chip`` or ``radio``)."""
    out: dict[str, int | None] = {}
    tree = ast.parse(path.read_text())
    calls = {id(n.func): len(n.args) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) == receiver:
            out.setdefault(node.attr, calls.get(id(node)))
    return out


def test_every_call_on_the_chip_exists_in_pyrf24_with_that_signature() -> None:
    used = chip_calls(ROOT / "longge" / "radio" / "rf24.py", "self._chip")
    assert {"begin", "is_chip_connected", "what_happened", "get_arc"} <= set(used)
    for name, nargs in used.items():
        assert hasattr(pyrf24.RF24, name), f"rf24.py uses RF24.{name}, which pyrf24 lacks"
        if nargs is not None:
            assert any(len(sig) == nargs for sig in pyrf24_signatures(name)), (name, nargs)


def test_every_radio_call_of_the_daemon_is_pyrf24s_or_a_declared_extension() -> None:
    """What the daemon calls on a radio reaches pyrf24 through the backend's passthrough, or
    is one of LinkRadio's declared capabilities (every backend has them: no getattr probes)."""
    sources = [
        *sorted((ROOT / "longge" / "daemon").glob("*.py")),
        ROOT / "longge" / "radio" / "options.py",
    ]
    for path in sources:
        assert "getattr(radio" not in path.read_text(), f"{path.name} probes a radio"
        for name, nargs in chip_calls(path, "radio").items():
            if name in EXTENSIONS:
                continue
            assert name in RADIO_METHODS or name in RADIO_PROPERTIES, f"{path.name}: {name}"
            assert hasattr(pyrf24.RF24, name), f"{path.name}: pyrf24 has no {name}"
            if nargs is not None and name in RADIO_METHODS:
                sigs = pyrf24_signatures(name)
                assert any(len(s) >= nargs for s in sigs), (path.name, name, nargs, sigs)


def test_the_real_driver_is_pyrf24_and_a_missing_spi_bus_is_explained() -> None:
    radio = Rf24Radio(25, 0, name="mobile-tx")
    assert isinstance(radio._chip, pyrf24.RF24)
    if os.path.exists(spidev(0)):
        pytest.skip("this machine has /dev/spidev0.0: radio may be real")
    with pytest.raises(HardwareError) as err:
        radio.begin()
    text = str(err.value)
    assert "mobile-tx radio (CE GPIO25, CSN /dev/spidev0.0)" in text and "raspi-config" in text


def test_a_chip_that_does_not_answer_is_explained(tmp_path: Path) -> None:
    radio = Rf24Radio(
        22, 1, name="base-rx", driver=lambda c, s, v: SimRadio(c, s, v, air=str(tmp_path / "none"))
    )
    with pytest.raises(HardwareError, match=r"GPIO22.*spidev0\.1.*does not answer.*3\.3 V"):
        radio.begin()


class StuckChip(SimRadio):
    """A radio on a bad supply: SPI answers, but a channel write does not stick."""

    @property
    def channel(self) -> int:
        return 2

    @channel.setter
    def channel(self, value: int) -> None:
        pass


class OldChip(SimRadio):
    @property
    def is_plus_variant(self) -> bool:
        return False


def test_settings_are_read_back_and_250k_needs_the_plus_variant(air_path: str) -> None:
    stuck = Rf24Radio(22, 0, name="tx", driver=lambda c, s, v: StuckChip(c, s, v, air=air_path))
    assert stuck.begin()
    configure(stuck, RadioOptions(), channel=76)
    with pytest.raises(HardwareError, match="channel wrote 76 read 2"):
        stuck.verify(RadioOptions(), 76, 1)
    old = Rf24Radio(22, 0, name="tx", driver=lambda c, s, v: OldChip(c, s, v, air=air_path))
    assert old.begin()
    opts = RadioOptions(rate="250k", ard_us=1000)
    configure(old, opts, channel=76)
    with pytest.raises(HardwareError, match="not an nRF24L01\\+"):
        old.verify(opts, 76, 1)
    good = Rf24Radio(22, 0, name="tx", driver=lambda c, s, v: SimRadio(c, s, v, air=air_path))
    assert good.begin()
    configure(good, opts, channel=76)
    good.pa_level = 1
    good.verify(opts, 76, 1)


def test_pins_are_checked_in_the_config(tmp_path: Path) -> None:
    for toml, key in [
        ("[rf24]\ntx_ce_pin = 40", "rf24.tx_ce_pin"),
        ("[rf24]\nrx_csn_pin = 3", "rf24.rx_csn_pin"),
        ("[rf24]\nrx_ce_pin = 22", "rf24.rx_ce_pin"),
        ("[rf24]\nspi_speed = 50000000", "rf24.spi_speed"),
        ('[rf24]\ndriver = "wiringpi"', "rf24.driver"),
    ]:
        f = tmp_path / "c.toml"
        f.write_text(toml + "\n[security]\ninsecure = true\n")
        with pytest.raises(ConfigError) as err:
            configfile.load(f)
        assert err.value.key == key


@pytest.fixture
def rf24_link(air_path: str, tmp_path: Path) -> Iterator[Link]:
    with make_link(air_path, str(tmp_path), backend="rf24") as lk:
        yield lk


def test_the_daemon_runs_unchanged_over_the_rf24_backend(rf24_link: Link) -> None:
    """Through Rf24Radio, which offers pyrf24's names only (the emulated chip's descriptor is
    hidden: without an IRQ pin its fileno() is -1, so the radio processes poll as they do over
    real pyrf24 without one), on a lossy uplink: the
    retransmissions the backend counts are the air's, as far as ARC_CNT can tell."""
    from longge.radio.rf24 import Rf24Radio

    assert Rf24Radio(0, 0, driver=SimRadio).fileno() == -1
    query(
        rf24_link.air, b"P" + json.dumps({"per": 0.2, "tx": "mobile-tx", "rx": "base-rx"}).encode()
    )
    up = [ip_packet(40 + 61 * i, i) for i in range(20)]
    assert rf24_link.send(rf24_link.mtun, up, to=rf24_link.btun) == up
    down = [ip_packet(1400, 100 + i) for i in range(5)]
    assert rf24_link.send(rf24_link.btun, down, to=rf24_link.mtun) == down
    rf24_link.pump(0.5)
    st = rf24_link.mobile.status()
    assert st["radio"]["backend"] == "rf24" and st["tx"]["state"] == "up"
    air = query(rf24_link.air)["air"]["radios"]["mobile-tx"]
    ours = st["tx"]["retransmissions"]
    # ARC_CNT is read once per what_happened(): payloads that finish between two calls (a
    # loop turn that a busy machine made long) show one count, the last one's. How many
    # that is depends on the machine: test_one_payload_at_a_time_is_counted_exactly checks
    # the count itself.
    assert 0 < ours <= air["retransmissions"], (ours, air)


def test_one_payload_at_a_time_is_counted_exactly(air_path: str) -> None:
    """Over a lossy channel, payloads sent one at a time (each finished, sent or MAX_RT,
    before the next): ``retransmissions`` is the sum of the air's, neither less (a missed
    ARC_CNT) nor more (a MAX_RT counted twice while it stays raised)."""
    tx = Rf24Radio(
        22, 0, name="tx", driver=lambda c, s, v: SimRadio(c, s, v, air=air_path, name="rtx")
    )
    rx = SimRadio(air=air_path, name="rrx")
    opts = RadioOptions(ard_us=500, arc=3)
    assert tx.begin() and rx.begin()
    configure(tx, opts, channel=76)
    configure(rx, opts, channel=76)
    rx.open_rx_pipe(1, b"1Node")
    rx.start_listening()
    tx.stop_listening(b"1Node")
    query(air_path, b"P" + json.dumps({"per": 0.4, "tx": "rtx", "rx": "rrx"}).encode())
    lost = 0
    for i in range(60):
        assert tx.write_fast(bytes([i]) * 20)
        deadline = time.monotonic() + 5
        while True:
            sent, max_rt, _ = tx.what_happened()
            # asked again: a raised MAX_RT is one payload's, counted once. (What this call
            # says counts too: a payload that finished between the two, the first call not
            # seeing it, was cleared by the second, and the loop waited for it in vain.)
            again, again_max_rt, _ = tx.what_happened()
            sent, max_rt = sent or again, max_rt or again_max_rt
            if sent or max_rt:
                break
            assert time.monotonic() < deadline, "the payload never finished"
            time.sleep(0.001)
        if max_rt:
            lost += 1
            tx.flush_tx()
        while rx.available():
            rx.read()
    air = query(air_path)["air"]["radios"]["rtx"]
    assert tx.retransmissions == air["retransmissions"], (tx.retransmissions, air)
    assert tx.retransmissions > lost * 3  # (the channel was lossy: ARC 3 for each lost)


def test_a_radio_that_fails_to_answer_is_reported_and_retried(air_path: str) -> None:
    cfg = replace(
        config.NodeConfig(insecure=True, backend="rf24", driver="sim", air=air_path + ".gone"),
    )
    ours, _ = multiprocessing.Pipe()
    c = child.Child(cfg, "tx", ours, schedule=False)  # a radio process's state, in this one
    now = time.monotonic()
    assert c.ensure_radio(now) is None
    assert c.state.startswith("radio_error: mobile-tx radio (CE GPIO22, CSN /dev/spidev0.0)")
    assert c.ensure_radio(now + 0.1) is None and c.radio_attempts == 1  # waits RETRY_RADIO_S
    assert c.ensure_radio(now + child.RETRY_RADIO_S) is None and c.radio_attempts == 2


def test_a_node_without_pyrf24_is_told_so_not_given_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """backend = "rf24" where pyrf24 is not installed: a HardwareError the radio process shows
    in its state and retries (once a ModuleNotFoundError that killed it, again and again)."""
    import sys

    from longge.errors import HardwareError
    from longge.radio.rf24 import Rf24Radio

    monkeypatch.setitem(sys.modules, "pyrf24", None)  # what import finds when it is missing
    with pytest.raises(HardwareError, match="pyrf24 is not installed"):
        Rf24Radio(22, 0, 10_000_000, name="tx")
