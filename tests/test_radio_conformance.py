"""The emulated radio offers pyrf24's names, parameters and constants (checked against the
installed pyrf24, whose pybind11 docstrings carry its signatures)."""

from __future__ import annotations

import inspect
import re

import pyrf24
import pytest

from longge.radio import constants
from longge.radio.interface import RADIO_METHODS, RADIO_PROPERTIES, Radio
from longge.radio.sim import SimRadio


def split_params(text: str) -> list[str]:
    """Split 'a: int, b: Union[x, y] = 1' at the commas outside brackets; keep the names."""
    names, depth, current = [], 0, ""
    for ch in text + ",":
        if ch == "," and depth == 0:
            name = current.split(":")[0].split("=")[0].strip()
            if name:
                names.append(name)
            current = ""
            continue
        depth += int(ch in "[(")
        depth -= int(ch in "])")
        current += ch
    return names


def pyrf24_signatures(name: str) -> list[list[str]]:
    """Parameter-name lists of every overload pyrf24 documents for RF24.<name>."""
    doc = getattr(pyrf24.RF24, name).__doc__ or ""
    # (an overload's line may end in a backslash: set_auto_ack documents two that way)
    pattern = rf"^\s*{name}\((.*)\)(?:\s*->[^\n]*?)?\s*\\?$"
    return [split_params(m.group(1)) for m in re.finditer(pattern, doc, re.MULTILINE)]


@pytest.mark.parametrize("name", RADIO_METHODS)
def test_method_exists_in_pyrf24_and_accepts_its_parameters(name: str) -> None:
    assert hasattr(pyrf24.RF24, name), f"pyrf24.RF24 has no {name}"
    overloads = pyrf24_signatures(name)
    assert overloads, f"no signature found in pyrf24's docstring of {name}"
    ours = inspect.signature(getattr(SimRadio, name))
    params = [p for p in ours.parameters.values() if p.name != "self"]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return  # an overloaded call such as set_auto_ack(enable) / set_auto_ack(pipe, enable)
    names = [p.name for p in params if p.kind is not p.KEYWORD_ONLY]
    for theirs in overloads:
        assert names[: len(theirs)] == theirs, f"{name}{tuple(names)} vs pyrf24 {theirs}"
        extra = [p for p in params[len(theirs) :] if p.default is p.empty]
        assert not extra, f"{name} requires parameters pyrf24 does not: {extra}"


@pytest.mark.parametrize("name", RADIO_PROPERTIES)
def test_property_exists_in_both(name: str) -> None:
    assert hasattr(pyrf24.RF24, name), f"pyrf24.RF24 has no {name}"
    assert isinstance(getattr(SimRadio, name, None), property) or name == "failure_detected"


def test_constructor_matches_pyrf24() -> None:
    doc = pyrf24.RF24.__init__.__doc__ or ""
    assert "__init__(ce_pin: int, csn_pin: int, spi_speed: int = 10000000)" in doc
    params = list(inspect.signature(SimRadio.__init__).parameters)[1:4]
    assert params == ["ce_pin", "csn_pin", "spi_speed"]


def test_enumeration_values_match_pyrf24() -> None:
    for name in dir(constants):
        if name.startswith("RF24_") and hasattr(pyrf24, name):
            assert int(getattr(constants, name)) == int(getattr(pyrf24, name)), name


def test_sim_radio_satisfies_the_protocol() -> None:
    assert isinstance(SimRadio(air="/nonexistent"), Radio)


@pytest.mark.parametrize(
    "backend", [{"backend": "sim"}, {"backend": "rf24", "driver": "sim"}, {"backend": "serial"}]
)
def test_every_backend_offers_what_the_daemon_asks_for(backend: dict[str, str]) -> None:
    """The daemon once probed its radios with getattr for close, verify, fileno, take_edges
    and counters that the protocol did not declare: a backend without one was silently
    treated another way. Every backend now offers the whole LinkRadio, before it is begun."""
    from longge.config import NodeConfig
    from longge.radio.factory import open_radio
    from longge.radio.interface import LinkRadio

    cfg = NodeConfig(air="/nonexistent", insecure=True, **backend)  # type: ignore[arg-type]
    members = [n for n in vars(LinkRadio) if not n.startswith("_")]
    assert {"fileno", "irq_edges", "take_edges", "link_errors", "verify", "close"} <= set(members)
    for which in ("tx", "rx"):
        radio = open_radio(cfg, which)
        assert isinstance(radio, LinkRadio), [n for n in members if not hasattr(radio, n)]
        assert radio.fileno() == -1 or radio.fileno() >= 0
        assert radio.take_edges() == 0 and radio.irq_edges is None  # no IRQ pin wired
        radio.close()
