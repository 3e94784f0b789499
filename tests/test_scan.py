"""The channel survey: the emulated received power detector follows the datasheet (a carrier
on the channel for 40 µs while in RX mode, latched until RX mode ends), the Wi-Fi interferer
covers its 22 MHz, and the suggestion picks quiet, separated channels inside the ISM band."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from longge import config, scan
from longge.air.interferer import RPD_MIN_NS, Interferer
from longge.air.model import Air, RadioRegisters
from longge.air.wire import wifi_centre
from longge.errors import LongGeError
from longge.scan import Survey, plot, render, suggest


def on_air(channel: int) -> tuple[Air, int]:
    """A transmitter sending one 32-byte no-ack frame at t=0 on ``channel`` (2 Mbit/s)."""
    air = Air()
    tx = air.attach("tx")
    air.configure(
        tx,
        RadioRegisters(
            channel=channel, tx_address=b"Node1", dynamic_payloads=True, dynamic_ack=True
        ),
        0,
    )
    air.submit(tx, bytes(32), True, 0)
    return air, tx


def listener(air: Air, channel: int, at: int) -> int:
    rid = air.attach("scanner")
    air.configure(rid, RadioRegisters(channel=channel, rate="2M"), at)
    air.set_listening(rid, True, at)
    return rid


def test_rpd_needs_a_carrier_on_the_channel_while_listening() -> None:
    air, _ = on_air(40)
    same, near, far = listener(air, 40, 0), listener(air, 41, 0), listener(air, 45, 0)
    late = 400_000  # the frame (130 µs settle + 160 µs on air) is over by then
    assert air.rpd(same, late) and air.rpd(near, late)  # 2 MHz wide at 2 Mbit/s
    assert not air.rpd(far, late)
    air.set_listening(same, False, late)  # leaving RX mode resets it
    air.set_listening(same, True, late)
    assert not air.rpd(same, late + 200_000)


def test_rpd_of_a_listener_that_started_after_the_frame_stays_clear() -> None:
    air, _ = on_air(40)
    rid = listener(air, 40, 1_000_000)
    assert not air.rpd(rid, 1_000_000 + 2 * RPD_MIN_NS)


def test_wifi_interferer_covers_22_mhz() -> None:
    air = Air()
    air.interferers.append(Interferer(wifi_centre(6), duty=1.0))
    assert wifi_centre(1) == 12 and wifi_centre(6) == 37 and wifi_centre(13) == 72
    inside, edge, outside = listener(air, 30, 0), listener(air, 48, 0), listener(air, 60, 0)
    t = 500_000
    assert air.rpd(inside, t) and air.rpd(edge, t) and not air.rpd(outside, t)
    quiet = Air()
    quiet.interferers.append(Interferer(37, duty=0.0))
    assert not quiet.rpd(listener(quiet, 37, 0), t)


def test_suggestion_avoids_busy_channels_and_stays_in_the_ism_band(tmp_path: Path) -> None:
    hits = [0] * 126
    for ch in range(26, 49):  # Wi-Fi 6
        hits[ch] = 8
    for ch in (75, 76, 77, 85, 86, 87):  # a LongGe link
        hits[ch] = 10
    for ch in range(0, 126, 3):  # background noise everywhere but a few channels
        hits[ch] += 1
    survey = Survey(10, hits)
    a, b = suggest(survey)
    assert a < b <= 83 and b - a >= 4
    for ch in (a, b):
        assert max(survey.occupancy[max(0, ch - 2) : ch + 3]) <= 0.1, ch
    text = render(survey, marks=(a, b))
    assert text.count("^") == 2 and "█" in text
    made = plot(survey, tmp_path / "scan", marks=(a, b))
    assert all(p.stat().st_size > 1000 for p in made)


def node_toml(tmp_path: Path, security: str = "insecure = true") -> Path:
    """An installed node's config: RX radio on CE GPIO5, /dev/spidev1.2 (not the defaults)."""
    f = tmp_path / "longge.toml"
    f.write_text(
        f'[node]\ncontrol = "{tmp_path / "c.sock"}"\n[security]\n{security}\n'
        '[radio]\nbackend = "rf24"\n[rf24]\nrx_ce_pin = 5\nrx_csn_pin = 12\n'
    )
    return f


def scan_rf24(config_path: str | None, tmp_path: Path, say: list[str] | None = None) -> str:
    """scan --backend rf24 where no SPI device is (pyrf24 cannot open the radio): the error,
    which names the radio it tried."""
    pytest.importorskip("pyrf24")
    if list(Path("/dev").glob("spidev*")):
        pytest.skip("this machine has SPI devices: the scan could reach a real radio")
    heard = say if say is not None else []
    with pytest.raises(LongGeError) as err:
        scan.run(config_path, "rf24", None, 1, 200, out=tmp_path / "scan", say=heard.append)
    return str(err.value)


def test_scan_rf24_takes_the_installed_configs_pins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --config, scan --backend rf24 used the default pins even on a node whose
    /etc/longge/longge.toml says otherwise; it scans with that file's RX radio now, also when
    the file's key cannot be read (not root, not copied yet: the scan needs no key)."""
    for security in (
        "insecure = true",
        'key_file = "/nonexistent/key"',
        'state_dir = "/var/lib/longge"\n[[peer]]\nkey_file = "/nonexistent/key"',
    ):
        monkeypatch.setattr(config, "DEFAULT_PATH", str(node_toml(tmp_path, security)))
        said = scan_rf24(None, tmp_path)
        assert "CE GPIO5" in said and "/dev/spidev1.2" in said, (security, said)


def test_scan_rf24_is_not_blocked_by_a_dead_daemons_socket(tmp_path: Path) -> None:
    """A control socket a crashed daemon left (nobody listens) blocked every scan ("the daemon
    is using the radios"); a listening one still does."""
    cfg = str(node_toml(tmp_path))
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(tmp_path / "c.sock"))
    left.close()  # the file stays, nobody listens
    said = scan_rf24(cfg, tmp_path)
    assert "daemon is using" not in said and "CE GPIO5" in said, said
    (tmp_path / "c.sock").unlink()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(str(tmp_path / "c.sock"))
        live.listen(1)
        said = scan_rf24(cfg, tmp_path)
    assert "the daemon is using the radios" in said, said


def test_scan_rf24_goes_on_with_the_default_pins_past_a_broken_installed_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed config that cannot be read at all (not TOML) does not stop a scan that
    needs only pins: it says so and scans with the wiring table's (CE GPIO25)."""
    broken = tmp_path / "longge.toml"
    broken.write_text("[rf24\n")
    monkeypatch.setattr(config, "DEFAULT_PATH", str(broken))
    monkeypatch.setattr(scan, "_daemon_listening", lambda control: False)  # (a daemon may run here)
    heard: list[str] = []
    said = scan_rf24(None, tmp_path, heard)
    assert any("not used" in h for h in heard), heard
    assert "CE GPIO25" in said, said


def test_a_scan_that_fails_half_way_takes_its_wifi_interferer_away(
    air_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """scan --wifi puts an interferer on the emulated air for the scan; a scan that fails
    (here its sweep, made to raise) must take it away again, or every later scan and every
    link on that air would see a Wi-Fi network that is not there. The next scan of the same
    air finds it quiet."""
    with monkeypatch.context() as m:

        def broken(*args: object) -> None:
            raise RuntimeError("the sweep failed")

        m.setattr(scan, "sweep", broken)
        with pytest.raises(RuntimeError):
            scan.run(None, "sim", air_path, 2, 200, wifi=6, duty=0.9, out=tmp_path / "a")
    done = scan.run(None, "sim", air_path, 4, 200, out=tmp_path / "b")
    assert done.busy == [], done.survey.occupancy
    # (and the interferer was there: a scan with it finds its channels busy)
    done = scan.run(None, "sim", air_path, 4, 200, wifi=6, duty=0.9, out=tmp_path / "c")
    assert any(29 <= ch <= 45 for ch in done.busy), done.busy


def test_the_link_view_draws_each_end_s_levels_and_the_link_s_channels() -> None:
    from longge.protocol.band import Band
    from longge.scan import link_view

    band = Band(range(84))
    for c in range(84):
        for _ in range(4):
            band.reading(c, 61 <= c <= 83, 0.0)
    view = link_view(
        {"uplink": 38, "downlink": 0, "band": band.stats(0.0), "recent": [[1, 2.5, "move 1"]]}
    ).splitlines()
    here = view[1].split("here", 1)[1][7:]
    assert here[:61] == "." * 61 and here[61:84] == "#" * 23
    assert "(none)" in view[2]  # (no report from the peer)
    link = view[3].split("the link", 1)[1][3:]
    assert link[0] == "D" and link[38] == "U"
    assert "move 1" in view[4]
