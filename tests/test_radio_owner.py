"""The radio's owner (longge/daemon/radio_owner.py): the only code in the daemon that writes a
chip's settings. It applies actions in the order given, knows what the chip is set to, and
applies actions given for later once their time has come. Held to being the only writer by
reading the package's code and by a recording radio in front of each radio of a running link."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemonlink import ip_packet, make_link
from recording_radio import SETTING_METHODS, SETTING_PROPERTIES, RecordingRadio, records

import longge
from longge.daemon import child as child_module
from longge.daemon.radio_owner import ChipSettings, RadioOwner
from longge.protocol.actions import AutoAck, Channel, Listen, Power, Rate, Retries, Transmit
from longge.radio.constants import RATE_BY_NAME
from longge.radio.options import RadioOptions

PACKAGE = Path(longge.__file__).parent


class Chip:
    """A chip as far as settings go: every write noted, in order."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, tuple[Any, ...]]] = []

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "writes":
            self.writes.append((name, (value,)))
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.writes.append((name, args))


def settings() -> ChipSettings:
    return ChipSettings.configured(RadioOptions(), 76, 1, b"LGm2b")


def test_actions_reach_the_chip_in_order_and_the_owner_knows_what_it_is_set_to() -> None:
    chip = Chip()
    owner = RadioOwner(chip, settings())  # type: ignore[arg-type]
    owner.apply(Channel(81), Retries(1, 0), AutoAck(0, True), Rate("250k"), Power(3))
    owner.apply(Listen(), Transmit(b"LGb2m"))
    assert chip.writes == [
        ("channel", (81,)),
        ("set_retries", (1, 0)),
        ("set_auto_ack", (0, True)),
        ("data_rate", (int(RATE_BY_NAME["250k"]),)),
        ("pa_level", (3,)),
        ("start_listening", ()),
        ("stop_listening", (b"LGb2m",)),
    ]
    s = owner.settings
    assert s is not None
    assert (s.channel, s.rate, s.pa_level, s.ard_step, s.arc) == (81, "250k", 3, 1, 0)
    assert s.auto_ack[0] and not s.listening and s.tx_address == b"LGb2m"


def test_without_a_radio_nothing_is_written_and_its_settings_are_unknown() -> None:
    chip = Chip()
    owner = RadioOwner(chip, settings())  # type: ignore[arg-type]
    owner.gone()
    owner.apply(Channel(5))
    assert chip.writes == [] and owner.settings is None and owner.radio is None


def test_actions_given_for_later_wait_for_their_time_and_keep_their_order() -> None:
    chip = Chip()
    owner = RadioOwner(chip, settings())  # type: ignore[arg-type]
    owner.schedule(2.0, Channel(40), Retries(0, 15))
    owner.schedule(1.0, Channel(20))
    owner.schedule(2.0, Channel(41))
    assert owner.wake_at(0.0) == 1.0
    owner.due(0.5)
    assert chip.writes == []
    owner.due(1.0)
    assert chip.writes == [("channel", (20,))] and owner.wake_at(0.0) == 2.0
    owner.gone()  # (no radio: they wait for the next)
    owner.due(3.0)
    assert len(chip.writes) == 1 and owner.wake_at(0.0) == 2.0
    owner.radio, owner.settings = chip, settings()  # type: ignore[assignment]
    owner.due(3.0)
    assert chip.writes[1:] == [("channel", (40,)), ("set_retries", (0, 15)), ("channel", (41,))]
    assert owner.wake_at(0.0) is None
    assert owner.settings is not None and owner.settings.channel == 41


def stray_writes(path: Path) -> list[str]:
    """Settings writes in a module's code: a setting assigned on anything but ``self``, a
    settings method called, ``configure`` called."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            on_self = isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
            on_self = on_self and t.value.id == "self"  # type: ignore[attr-defined]
            if isinstance(t, ast.Attribute) and t.attr in SETTING_PROPERTIES and not on_self:
                found.append(f"{path.name}:{node.lineno} sets .{t.attr}")
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in SETTING_METHODS:
                found.append(f"{path.name}:{node.lineno} calls .{f.attr}()")
            if isinstance(f, ast.Name) and f.id == "configure":
                found.append(f"{path.name}:{node.lineno} calls configure()")
    return found


def test_no_module_of_a_node_but_the_owner_writes_a_chip_setting() -> None:
    modules = [p for d in ("daemon", "protocol") for p in sorted((PACKAGE / d).glob("*.py"))]
    assert len(modules) > 40
    found = [w for p in modules if p.name != "radio_owner.py" for w in stray_writes(p)]
    assert found == []
    # (the check sees a write where there is one)
    assert stray_writes(PACKAGE / "daemon" / "radio_owner.py")


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Every radio the daemons' processes open (forked: they inherit the patch) behind a
    recording radio; the notes of all of them in one file."""
    log = tmp_path / "writes.log"
    real = child_module.open_radio

    def recording(cfg: Any, which: str) -> Any:
        return RecordingRadio(real(cfg, which), log)

    monkeypatch.setattr(child_module, "open_radio", recording)
    yield log


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_every_settings_write_of_a_running_link_comes_from_the_radios_owner(
    air_path: str, tmp_path: Path, recorded: Path, mode: str
) -> None:
    """A link that adapts its rate, power and retries, carries traffic both ways and is
    reconfigured live: every settings write its four radios saw was the owner's."""
    opts = RadioOptions(mode=mode, adapt=True, ard_us=1000, arc=15)
    with make_link(air_path, str(tmp_path / "link"), opts) as link:
        up = [ip_packet(1000, i) for i in range(30)]
        assert link.send(link.mtun, up, to=link.btun, timeout=10) == up
        down = [ip_packet(600, 100 + i) for i in range(10)]
        assert link.send(link.btun, down, to=link.mtun, timeout=10) == down
        assert "error" not in link.mobile.set_radio({"arc": 5, "ard_us": 750})
        link.pump(0.5)
        assert link.send(link.mtun, up[:5], to=link.btun, timeout=10) == up[:5]
    notes = records(recorded)
    names = {name for name, _, _ in notes}
    # (each radio was set up whole, twice for the mobile's after the change)
    assert {"channel", "data_rate", "pa_level", "set_retries", "stop_listening"} <= names
    assert sum(1 for name, _, _ in notes if name == "start_listening") >= 2  # (the RX radios)
    strays = [n for n in notes if n[2] != "owner"]
    assert strays == [], strays
    assert os.path.getsize(recorded) > 0
