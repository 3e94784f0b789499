"""A link that moves off a busy channel (``[radio] agile = true``; docs/design.md §6), with
the daemons over the emulated air: Wi-Fi switched on over both of the link's channels, the
ends move together out of its reach and carry packets again; a link that is not agile stays
where it is."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import pytest
from daemonlink import LINK_KEY, Link, make_link

from longge.air import control
from longge.commands.node import _scan_link
from longge.config import NodeConfig, PeerConfig
from longge.radio.options import RadioOptions

WIFI_13 = "wifi:13:0.5"  # (nRF channels 61..83: the link's 76 and 81)


def channels(lk: Link) -> tuple[Any, Any]:
    """(the base's plan, the mobile's following) as their RX processes report them."""
    b = lk.base.status()["rx"].get("channels") or {}
    m = lk.mobile.status()["rx"].get("channels") or {}
    return b, m


def moved_out(lk: Link, seconds: float) -> tuple[Any, Any]:
    """Pump the link (packets both ways) until both ends are out of Wi-Fi 13's reach."""
    end = time.monotonic() + seconds
    b, m = channels(lk)
    while time.monotonic() < end:
        lk.send_for(0.3, 600)
        b, m = channels(lk)
        ends = (b.get("uplink"), b.get("downlink"), m.get("uplink"), m.get("downlink"))
        if all(isinstance(c, int) and c < 61 for c in ends):
            return b, m
    return b, m


def agile_mobile(tmp_path: os.PathLike[str]) -> NodeConfig:
    """A secured agile mobile's config, its state in ``tmp_path`` (the RX part alone)."""
    return NodeConfig(
        role="mobile",
        state_dir=str(tmp_path),
        radio=RadioOptions(agile=True),
        peers=(PeerConfig(key=bytes(32)),),
    )


def tx_pair() -> tuple[socket.socket, socket.socket]:
    """(the RX process's end, the TX process's end: not blocking) of their pair."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.setblocking(False)
    return ours, theirs


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_wifi_over_the_link_moves_both_ends_together_and_packets_go_through_again(
    air_path: str, tmp_path: os.PathLike[str], mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    radio = RadioOptions(mode=mode, ard_us=250, arc=3, agile=True)
    with make_link(air_path, str(tmp_path), radio) as lk:
        end = time.monotonic() + 30.0  # (a clean band read a while: a sweep takes a second)
        b, m = channels(lk)
        while time.monotonic() < end and not (b and m and m["band"]["known"] > 40):
            lk.send_for(0.5, 600)
            b, m = channels(lk)
        assert (b["uplink"], b["downlink"]) == (76, 81) and m["band"]["known"] > 40, (b, m)
        assert m["searching"] is False and m["uplink"] == 76
        control.apply(air_path, {}, interferer=WIFI_13)
        b, m = moved_out(lk, 20.0)
        assert b["uplink"] < 61 and b["downlink"] < 61, (b, m)
        assert (m["uplink"], m["downlink"]) == (b["uplink"], b["downlink"]), (b, m)
        assert b["judged"]["downlink"]["moves"] + b["judged"]["uplink"]["moves"] >= 1
        sent, got = lk.send_for(2.0, 600)  # (through again: most of it, on a busy machine)
        assert len(got) >= 0.75 * len(sent), (len(sent), len(got), b, m)
        # scan --link: the base's picture, Wi-Fi 13's channels busy, the link's marked
        said: list[int] = []
        asking = threading.Thread(
            target=lambda: said.append(_scan_link(os.path.join(str(tmp_path), "b.sock")))
        )
        asking.start()
        while asking.is_alive():  # (the daemons answer as they are stepped)
            lk.pump(0.05)
        assert said == [0]
        view = capsys.readouterr().out.splitlines()
        here = next(line for line in view if line.lstrip().startswith("here"))
        marks = next(line for line in view if line.lstrip().startswith("the link"))
        column = len(here) - len(here.lstrip()) + len("here       ")
        wifi, rest = here[column + 61 : column + 84], here[column : column + 50]
        assert set(wifi) & set("-#") and not set(rest) & set("#"), view  # (busy in its reach)
        assert marks[column + b["uplink"]] == "U" and marks[column + b["downlink"]] == "D"


@pytest.mark.parametrize("mode", ["esb", "stream"])
def test_a_mobile_that_missed_a_move_finds_its_base(
    air_path: str, tmp_path: os.PathLike[str], mode: str
) -> None:
    """Both start where they had their link last (their kept channels), the mobile on an older
    pair than the base (it missed the last move: 20/25, the base 38/0): it hears nothing,
    searches, finds the base's downlink (the base beacons its HERE to a mobile it does not
    hear), the HERE tells it the uplink, and packets go through. In stream mode the HERE goes
    outside the ARQ's window (a CHANNEL frame): the mobile's ACKs go to the uplink's old
    channel till it has heard one, so the window stays full (in the window, a HERE never
    went: the two stayed apart for good)."""
    from longge.daemon.agility import kept_file

    state = os.path.join(str(tmp_path), "state")  # (make_link's)
    os.makedirs(state, exist_ok=True)
    base = NodeConfig(
        role="base",
        address="10.24.0.1/24",
        peers=(PeerConfig(address="10.24.0.2", key=LINK_KEY),),
        state_dir=state,
    )
    mobile = NodeConfig(role="mobile", peers=(PeerConfig(key=LINK_KEY),), state_dir=state)
    kept_file(base).write_text('{"uplink": 38, "downlink": 0}')
    kept_file(mobile).write_text('{"uplink": 20, "downlink": 25}')
    radio = RadioOptions(mode=mode, ard_us=250, arc=3, agile=True)
    with make_link(air_path, str(tmp_path), radio, up_within=40.0) as lk:
        end = time.monotonic() + 30.0
        b, m = channels(lk)
        while time.monotonic() < end and (m.get("uplink"), m.get("downlink")) != (38, 0):
            lk.send_for(0.3, 600)
            b, m = channels(lk)
        assert (b["uplink"], b["downlink"]) == (38, 0), b
        assert (m["uplink"], m["downlink"]) == (38, 0) and m["found"] >= 1, m
        sent, got = lk.send_for(2.0, 600)  # (through: most of it, on a busy machine)
        assert len(got) >= 0.75 * len(sent), (len(sent), len(got), b, m)


def test_a_restarted_node_starts_where_its_link_was(tmp_path: os.PathLike[str]) -> None:
    """The link's channels are kept in the state folder when they move; a node started
    again starts there (both its radios), not at home; a kept pair it may not use is not."""
    from longge.daemon.agility import RxAgility
    from longge.daemon.messages import SwitchAt, received
    from longge.daemon.radio_owner import RadioOwner

    cfg = agile_mobile(tmp_path)
    ours, theirs = tx_pair()
    first = RxAgility(cfg, RadioOwner(), ours, 0.0)
    assert first.channels() == (76, 81) and not list(received(theirs))
    assert first.follower is not None
    first.follower.uplink, first.follower.downlink = 38, 0  # (as a move leaves them)
    first._keep()
    owner = RadioOwner()
    again = RxAgility(cfg, owner, ours, 5.0)
    assert again.channels() == (38, 0) and owner.link_channel == 0
    assert list(received(theirs)) == [SwitchAt(38, 0, 5.0)]  # (the TX radio's, at once)
    first.kept.write_text('{"uplink": 200, "downlink": 0}')
    assert RxAgility(cfg, RadioOwner(), ours, 6.0).channels() == (76, 81)
    ours.close()
    theirs.close()


def test_a_link_without_security_does_not_move_and_says_why(tmp_path: os.PathLike[str]) -> None:
    from longge.daemon.agility import RxAgility
    from longge.daemon.radio_owner import RadioOwner

    cfg = NodeConfig(
        role="base",
        insecure=True,
        state_dir=str(tmp_path),
        tx_channel=81,
        rx_channel=76,
        radio=RadioOptions(agile=True),
    )
    assert any("without security" in w for w in cfg.warnings())
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    agility = RxAgility(cfg, RadioOwner(), ours, 0.0)
    assert agility.plan is not None and agility.plan.pinned
    ours.close()
    theirs.close()


def test_an_agile_node_lets_its_pump_sleep_and_works_only_when_due(
    tmp_path: os.PathLike[str],
) -> None:
    """The RX pump turns for every frame and sleeps till its parts' soonest moment: the
    agility's moment is never in the past (a searching mobile's was: its dwell's moment stayed
    behind, and the pump never slept), and a turn before it does nothing."""
    from longge.daemon.agility import RxAgility
    from longge.daemon.peers import receivers
    from longge.daemon.radio_owner import RadioOwner

    cfg = agile_mobile(tmp_path)
    ours, theirs = tx_pair()
    table = receivers(cfg, arq=False)
    agility = RxAgility(cfg, RadioOwner(), ours, 0.0)
    assert agility.follower is not None
    t = 0.0
    for _ in range(400):  # (4 s of turns each 10 ms: lost at 0.75 s, then searching)
        agility.turn(table, t)
        at = agility.wake_at(t)
        assert at is not None and at >= t, (t, at, agility.follower.stats(t))
        t += 0.01
    assert agility.follower.searching and agility.follower.searches == 1
    assert agility.reporting is not None
    due, reports = agility._due, agility.reporting.reports
    agility.turn(table, due - 0.001)  # (before its moment, nothing came: nothing done)
    assert agility._due == due and agility.reporting.reports == reports
    ours.close()
    theirs.close()
