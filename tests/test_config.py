"""Node configuration: the shipped examples load; every wrong value names its key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from longge import config, configfile
from longge.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


KEY = "ab" * 32


def example(name: str, tmp_path: Path) -> Path:
    """A shipped example config, its key_file pointed at a key made for the test."""
    key = tmp_path / "key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)  # (as keygen makes it: a key others can read is refused)
    text = (ROOT / name / "longge.toml").read_text()
    assert 'key_file = "/etc/longge/key"' in text
    out = tmp_path / f"{name}.toml"
    out.write_text(text.replace("/etc/longge/key", str(key)))
    return out


def test_example_configs_load_and_mirror_each_other(tmp_path: Path) -> None:
    base = configfile.load(example("basestation", tmp_path))
    mobile = configfile.load(example("mobile", tmp_path))
    (bp,), (mp,) = base.peers, mobile.peers
    assert bp.key == mp.key == bytes.fromhex(KEY)
    assert (base.role, mobile.role) == ("base", "mobile")
    assert base.tx_channel == mobile.rx_channel and base.rx_channel == mobile.tx_channel
    assert bp.tx_address == mp.rx_address and bp.rx_address == mp.tx_address
    assert bp.address == mobile.address.split("/")[0]


def test_overrides_win(tmp_path: Path) -> None:
    cfg = configfile.load(example("mobile", tmp_path), {"radio": {"arc": 7, "rate": "1M"}})
    assert cfg.radio.arc == 7 and cfg.radio.rate == "1M"


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[radio]\narc = 16", "radio.arc"),
        ("[radio]\nard_us = 260", "radio.ard_us"),
        ('[radio]\nrate = "4M"', "radio.rate"),
        ("[radio]\nrx_channel = 77", "radio.rx_channel"),  # 1 MHz from tx 76
        ("[radio]\ntx_channel = 130", "radio.tx_channel"),
        ("[radio]\npayload = 2", "radio.payload"),
        ('[radio]\nbackend = "usb"', "radio.backend"),
        ('[radio]\ntx_address = "abc"', "radio.tx_address"),  # 3 bytes, width 5
        ('[radio]\npa_level = "loud"', "radio.pa_level"),
        ("[radio]\narcc = 2", "radio.arcc"),
        ('[node]\naddress = "10.24.0.2"\npeer = "10.25.0.1"', "node.peer"),
        ('[node]\naddress = "banana"', "node.address"),
        ('[node]\nrole = "relay"', "node.role"),
        ("[node]\nmtu = 100", "node.mtu"),
        ('[node]\nqueue = "lifo"', "node.queue"),
        ('[node]\ntun = "a-very-long-interface-name"', "tun"),
        ('[mobile]\nroutes = ["10.99.0.0/33"]', "mobile.routes"),
        ('[mobile]\nroutes = ["2001:db8::/32"]', "mobile.routes"),  # the peer is IPv4
        ('[mobile]\nroutes = ["10.0.0.0/255.255.255.0"]', "mobile.routes"),  # ip wants /24
        ("[wifi]\nssid = 1", "wifi"),
        ("[radio\n", "config"),
        # security: on unless refused explicitly; keys checked
        ("[node]\nmtu = 1500", "security.key"),
        ('[security]\nkey = "abcd"', "security.key"),
        ('[security]\nkey = "' + "00" * 32 + '"', "security.key"),
        ('[security]\nkey = "' + "zz" * 32 + '"', "security.key"),
        ('[security]\nkey_file = "/nonexistent/key"', "security.key_file"),
        ('[security]\ninsecure = "yes"', "security.insecure"),
        ('[security]\ninsecure = true\nkey = "' + KEY + '"', "security.insecure"),
        ('[security]\ninsecure = true\nprevious_key = "' + KEY + '"', "security.previous_key"),
        ('[security]\ncipher = "rot13"', "security.cipher"),
    ],
)
def test_wrong_values_name_their_key(tmp_path: Path, toml: str, key: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(toml)
    with pytest.raises(ConfigError) as err:
        configfile.load(f)
    assert err.value.key == key


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="an existing TOML file"):
        configfile.load(tmp_path / "nope.toml")


def test_an_open_link_must_be_asked_for(tmp_path: Path) -> None:
    f = tmp_path / "open.toml"
    f.write_text("[security]\ninsecure = true\n")
    cfg = configfile.load(f)
    assert cfg.peers[0].key is None and not cfg.secured
    f.write_text('[security]\nkey = "' + KEY + '"\n')
    f.chmod(0o600)  # (a key written into a config others can read is refused)
    cfg = configfile.load(f)
    assert cfg.secured and KEY not in repr(cfg)  # the key stays out of logs and status


#: One wrong value for every key a node config has, with the key its error must name. Built
#: against the key tables below: a key added to longge/config.py fails
#: test_every_key_has_a_wrong_value_case until it has a case here.
WRONG = {
    "node.role": ('"router"', "node.role"),
    "node.tun": ('"a-very-long-interface-name"', "tun"),
    "node.address": ('"10.24.0.2/33"', "node.address"),
    "node.peer": ('"192.0.2.1"', "node.peer"),
    "node.mtu": ("100", "node.mtu"),
    "node.txqueuelen": ("0", "node.txqueuelen"),
    "node.queue_ms": ("0", "node.queue_ms"),
    "node.queue": ('"lifo"', "node.queue"),
    "node.control": ('"relative/path.sock"', "node.control"),
    "node.keepalive_s": ("0", "node.keepalive_s"),
    "radio.backend": ('"carrier-pigeon"', "radio.backend"),
    "radio.pa_level": ('"loud"', "radio.pa_level"),
    "radio.tx_channel": ("126", "radio.tx_channel"),
    "radio.rx_channel": ("77", "radio.rx_channel"),  # next to tx_channel 76
    "radio.channels": ('"0-200"', "radio.channels"),
    "radio.agile": ('"yes"', "radio.agile"),
    "radio.tx_address": ('"LG"', "radio.tx_address"),
    "radio.rx_address": ('"0xzz"', "radio.rx_address"),
    "radio.rate": ('"11M"', "radio.rate"),
    "radio.ard_us": ("300", "radio.ard_us"),
    "radio.arc": ("16", "radio.arc"),
    "radio.auto_ack": ('"yes"', "radio.auto_ack"),
    "radio.payload": ("33", "radio.payload"),
    "radio.address_width": ("6", "radio.address_width"),
    "radio.crc": ("3", "radio.crc"),
    "radio.mode": ('"turbo"', "radio.mode"),
    "radio.adapt": ('"yes"', "radio.adapt"),
    "radio.per": ("0.1", "radio.per"),  # the air's setting: refused in a node config
    "radio.ack_per": ("0.1", "radio.ack_per"),
    "radio.burst": ("2", "radio.burst"),
    "radio.seed": ("3", "radio.seed"),
    "sim.air": ('"air.sock"', "sim.air"),
    "sim.air_name": ('"mobile 2"', "sim.air_name"),
    "mobile.default_route": ('"yes"', "mobile.default_route"),
    "mobile.routes": ('["10.99.0.0/33"]', "mobile.routes"),
    "base.nat": ("1", "base.nat"),
    "base.uplink": ('"eth0/1"', "base.uplink"),
    "security.key": ('"abcd"', "security.key"),
    "security.key_file": ('"/nonexistent/key"', "security.key_file"),
    "security.previous_key": ('"abcd"', "security.previous_key"),
    "security.previous_key_file": ('"/nonexistent/old"', "security.previous_key_file"),
    "security.insecure": ('"yes"', "security.insecure"),
    "security.state_dir": ('"var/lib/longge"', "security.state_dir"),
    "rf24.tx_ce_pin": ("40", "rf24.tx_ce_pin"),
    "rf24.tx_csn_pin": ("3", "rf24.tx_csn_pin"),
    "rf24.rx_ce_pin": ("22", "rf24.rx_ce_pin"),  # the same GPIO as tx_ce_pin
    "rf24.rx_csn_pin": ("0", "rf24.rx_csn_pin"),  # the same CSN as tx_csn_pin
    "rf24.spi_speed": ("50000000", "rf24.spi_speed"),
    "rf24.tx_irq_pin": ("22", "rf24.tx_irq_pin"),  # the TX radio's CE
    "rf24.rx_irq_pin": ("9", "rf24.rx_irq_pin"),  # SPI0's MISO
    "rf24.driver": ('"wiringpi"', "rf24.driver"),
    "serial.tx_port": ('""', "serial.tx_port"),
    "serial.rx_port": ('"/dev/ttyUSB0"\ntx_port = "/dev/ttyUSB0"', "serial.rx_port"),
    "serial.baud": ("300", "serial.baud"),
}


def test_every_key_has_a_wrong_value_case() -> None:
    keys = {f"{s}.{k}" for s, ks in configfile._NODE_KEYS.items() for k in ks}
    keys |= {f"radio.{k}" for k in configfile._RADIO_KEYS | configfile._AIR_ONLY_KEYS}
    keys |= set(configfile._OLD_PEER_KEYS)  # (the form before [[peer]], still read)
    assert keys == set(WRONG), f"missing: {keys - set(WRONG)}, stale: {set(WRONG) - keys}"


@pytest.mark.parametrize("dotted", sorted(WRONG))
def test_each_key_refuses_a_wrong_value_by_name(tmp_path: Path, dotted: str) -> None:
    section, key = dotted.split(".")
    value, named = WRONG[dotted]
    secured = "" if section == "security" else "[security]\ninsecure = true\n"
    if section == "security" and key not in ("insecure",):
        secured = ""
    f = tmp_path / "bad.toml"
    f.write_text(f"{secured}[{section}]\n{key} = {value}\n")
    with pytest.raises(ConfigError) as err:
        configfile.load(f)
    assert err.value.key == named, str(err.value)


#: Values of every TOML type: each key takes one as a value of its own type or refuses it by
#: name (once, "tun = 5" and "routes = 5" crashed, "mtu = 1500.5" and "txqueuelen = true" were
#: taken, and "rate = [1]" named only its section).
#: The keys of the form before [[peer]] that are its one peer's now: PeerConfig's fields.
OLD_PEER_FIELDS = {
    "node.peer": "address",
    "radio.tx_address": "tx_address",
    "radio.rx_address": "rx_address",
}
ODD_VALUES = ("true", "1.5", "-1", '"x"', "[1]", "{ a = 1 }", "1979-05-27")


@pytest.mark.parametrize("dotted", sorted(k for k in WRONG if not k.startswith("security.")))
def test_a_value_of_any_type_is_taken_as_its_keys_type_or_refused_by_name(
    tmp_path: Path, dotted: str
) -> None:
    section, key = dotted.split(".")
    plain = config.NodeConfig(insecure=True)
    f = tmp_path / "odd.toml"
    for value in ODD_VALUES:
        f.write_text(f"[security]\ninsecure = true\n[{section}]\n{key} = {value}\n")
        try:
            cfg = configfile.load(f)
        except ConfigError as err:
            assert err.key in (dotted, key), (value, str(err))
            continue
        where: object
        default: object
        if hasattr(plain.radio, key):
            where, default = cfg.radio, plain.radio
        elif dotted in OLD_PEER_FIELDS:  # (the form before [[peer]]: its one peer's)
            key = OLD_PEER_FIELDS[dotted]
            where, default = cfg.peers[0], plain.peers[0]
        else:
            where, default = cfg, plain
        want = type(getattr(default, key))
        got = getattr(where, key)
        assert type(got) is want or (want is float and type(got) is int), (value, got)


def test_a_config_path_that_is_no_text_file_is_a_config_error(tmp_path: Path) -> None:
    binary = tmp_path / "longge.toml"
    binary.write_bytes(bytes(range(256)))
    for path in (tmp_path, binary):
        with pytest.raises(ConfigError) as err:
            configfile.load(path)
        assert err.value.key == "config"


def test_the_defaults_are_a_mirrored_pair_inside_the_band() -> None:
    """The code's defaults are the shipped configs' channels: in the ISM band (the downlink was
    86 = 2486 MHz once) and the same rule as the testbed and ``daemon --channel``."""
    from longge.chip.datasheet import ISM_MAX_CHANNEL
    from longge.radio.options import downlink_channel

    mobile = config.NodeConfig(insecure=True)
    assert max(mobile.tx_channel, mobile.rx_channel) <= ISM_MAX_CHANNEL
    assert mobile.rx_channel == downlink_channel(mobile.tx_channel)
    assert mobile.warnings() == []
    # a base station with no channels or addresses set is the mobile's mirror: two defaults talk
    base = config.NodeConfig(
        role="base",
        address="10.24.0.1/24",
        peers=(config.PeerConfig(address="10.24.0.2"),),
        insecure=True,
    )
    assert (base.tx_channel, base.rx_channel) == (mobile.rx_channel, mobile.tx_channel)
    (bp,), (mp,) = base.peers, mobile.peers
    assert (bp.tx_address, bp.rx_address) == (mp.rx_address, mp.tx_address)
    for up in range(0, 126):
        down = downlink_channel(up)
        assert abs(down - up) >= 2 and 0 <= down <= 125
        if up <= ISM_MAX_CHANNEL:
            assert down <= ISM_MAX_CHANNEL, up


def test_a_base_file_without_channels_or_addresses_is_the_default_mobiles_mirror(
    tmp_path: Path,
) -> None:
    """Once a base file that named none of its radios got the mobile's channels and addresses
    (the file was read on top of a default mobile): both nodes sent on one channel."""
    f = tmp_path / "base.toml"
    f.write_text(
        '[node]\nrole = "base"\naddress = "10.24.0.1/24"\npeer = "10.24.0.2"\n'
        "[security]\ninsecure = true\n"
    )
    base = configfile.load(f)
    f.write_text("[security]\ninsecure = true\n")
    mobile = configfile.load(f)
    assert (base.tx_channel, base.rx_channel) == (mobile.rx_channel, mobile.tx_channel)
    (bp,), (mp,) = base.peers, mobile.peers
    assert (bp.tx_address, bp.rx_address) == (mp.rx_address, mp.tx_address)
    assert mobile.tx_channel != base.tx_channel and mp.tx_address != bp.tx_address
    # what a file does set stays set
    f.write_text(
        '[node]\nrole = "base"\naddress = "10.24.0.1/24"\npeer = "10.24.0.2"\n'
        '[radio]\ntx_channel = 40\ntx_address = "ABCDE"\n[security]\ninsecure = true\n'
    )
    mine = configfile.load(f)
    assert (mine.tx_channel, mine.rx_channel, mine.peers[0].tx_address) == (40, 76, b"ABCDE")


def test_what_a_user_must_know_before_it_happens_is_said(tmp_path: Path) -> None:
    """default_route hands the node's own traffic to the radio; a channel above 83 is outside
    the band: allowed (labs, shielded rooms) but never silently."""
    cfg = configfile.load(example("mobile", tmp_path), {"mobile": {"default_route": True}})
    (warning,) = cfg.warnings()
    assert "default_route" in warning and "SSH" in warning
    out = configfile.load(example("mobile", tmp_path), {"radio": {"rx_channel": 90}})
    assert "radio.rx_channel" in [w.split(" ")[0] for w in out.warnings()]
    quiet = {"radio": {"rx_channel": 81}, "mobile": {"default_route": False}}
    assert configfile.load(example("mobile", tmp_path), quiet).warnings() == []
    base = configfile.load(example("basestation", tmp_path), {"mobile": {"default_route": True}})
    assert base.warnings() == []  # a base station does not route through the link


def test_the_writer_is_the_readers_inverse(tmp_path: Path) -> None:
    """configfile.dumps writes every key; reading the file gives the same config back (keys go
    by file, never into the text)."""
    import tomllib

    from longge.protocol.secure import generate_key, parse_key

    text = generate_key()
    key_file = tmp_path / "key"
    key_file.write_text(text + "\n")
    configs = [
        config.NodeConfig(insecure=True),
        config.NodeConfig(
            role="base",
            address="10.5.0.1/24",
            peers=(
                config.PeerConfig(
                    address="10.5.0.2",
                    tx_address=bytes.fromhex("e7e7e7e7e7"),
                    key=parse_key(text, "key"),
                ),
            ),
            mtu=1280,
            queue_ms=40,
            queue="fifo",
            routes=("192.168.9.0/24",),
            radio=config.RadioOptions(rate="1M", ard_us=750, arc=7, auto_ack=False, crc=1),
        ),
    ]
    for cfg in configs:
        written = configfile.dumps(cfg, key_file=str(key_file) if cfg.secured else None)
        assert text not in written  # the key itself is never written
        assert configfile.from_mapping(tomllib.loads(written)) == cfg
    with pytest.raises(ValueError):
        configfile.dumps(configs[1])  # a secured config needs the file its key is in


def test_the_testbed_spec_writes_configs_the_daemons_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from longge import testbed, testbed_spec
    from longge.protocol.secure import generate_key, parse_key
    from longge.radio.options import RadioOptions, downlink_channel

    monkeypatch.setattr(testbed_spec, "STATE_DIR", tmp_path)
    text = generate_key()
    testbed.paths()["key"].write_text(text + "\n")
    testbed.paths()["key"].chmod(0o600)  # (as the testbed makes it)
    key = parse_key(text, "key")
    spec = testbed.TestbedSpec(
        RadioOptions(ard_us=500, arc=5, channel=70),
        queue="fifo",
        queue_ms=40,
        mtu=1280,
        serial=True,
    )
    read = {}
    for role in ("mobile", "base"):
        path = tmp_path / f"{role}.toml"
        path.write_text(spec.node_toml(role, key))
        read[role] = configfile.load(path)
        assert read[role] == spec.node_config(role, key)
        assert (read[role].queue, read[role].queue_ms, read[role].mtu) == ("fifo", 40, 1280)
        assert (read[role].radio.ard_us, read[role].radio.arc, read[role].peers[0].key) == (
            500,
            5,
            key,
        )
    mobile, base = read["mobile"], read["base"]
    assert mobile.tx_channel == base.rx_channel == 70
    assert mobile.rx_channel == base.tx_channel == downlink_channel(70)
    assert (mobile.backend, base.backend) == ("serial", "sim")
    assert mobile.default_route and base.nat and base.uplink == "up0"
    open_link = testbed.TestbedSpec(secured=False)
    (tmp_path / "open.toml").write_text(open_link.node_toml("base", None))
    assert configfile.load(tmp_path / "open.toml").insecure
    for bad, key_name in (({"queue": "lifo"}, "queue"), ({"mtu": 10}, "mtu")):
        with pytest.raises(ConfigError) as err:
            testbed.TestbedSpec(**bad)  # type: ignore[arg-type]
        assert key_name in str(err.value.key)


def test_a_testbed_on_modems_plugs_two_into_each_node_on_them() -> None:
    """--serial: one mobile's two modems (its base on the sim backend, as the fault matrix
    measured it: modem-tx, modem-rx); with three mobiles the base's too, each node's config
    naming its own ports (issue 71)."""
    from longge import testbed

    one = testbed.TestbedSpec(serial=True, secured=False)
    assert [(m.process, m.air_name) for m in one.modems()] == [
        ("modem-tx", "mobile-tx"),
        ("modem-rx", "mobile-rx"),
    ]
    assert one.node_config("mobile", None).tx_port == str(testbed.STATE_DIR / "mobile-tx.pty")
    assert one.backend("base") == "sim"
    three = testbed.TestbedSpec(serial=True, mobiles=3, secured=False)
    nodes = ["mobile1", "mobile2", "mobile3", "base"]
    assert [m.process for m in three.modems()] == [
        f"modem-{n}-{w}" for n in nodes for w in ("tx", "rx")
    ]
    ports = {three.node_config("mobile", None, index=i).rx_port for i in range(3)} | {
        three.node_config("base", None).rx_port
    }
    assert ports == {str(m.pty) for m in three.modems() if m.which == "rx"}
    assert three.backend("base") == three.backend("mobile") == "serial"
    assert testbed.TestbedSpec(mobiles=3).modems() == []


def test_a_key_file_that_is_not_text_is_named(tmp_path: Path) -> None:
    """Once a UnicodeDecodeError out of daemon --config and doctor --config."""
    key = tmp_path / "key"
    key.write_bytes(bytes(range(128, 256)))
    f = tmp_path / "node.toml"
    f.write_text(f'[security]\nkey_file = "{key}"\n')
    with pytest.raises(ConfigError) as err:
        configfile.load(f)
    assert err.value.key == "security.key_file" and "not text" in str(err.value)


OLD_FORM = """
[node]
role = "mobile"
address = "10.24.0.2/24"
peer = "10.24.0.1"

[radio]
tx_address = "LGm2b"
rx_address = "LGb2m"

[security]
key_file = "KEYFILE"
"""


def test_a_one_peer_file_of_the_form_before_peer_tables_reads_as_that_peer(
    tmp_path: Path,
) -> None:
    """Files written before [[peer]] keep working, and say what the new form says."""
    key = tmp_path / "key"
    key.write_text(KEY)
    key.chmod(0o600)
    old = tmp_path / "old.toml"
    old.write_text(OLD_FORM.replace("KEYFILE", str(key)))
    cfg = configfile.load(old)
    new = tmp_path / "new.toml"
    new.write_text(configfile.dumps(cfg, key_file=str(key)))
    text = new.read_text()
    assert (
        "[[peer]]" in text
        and "\npeer =" not in text
        and "tx_address" not in text.split("[[peer]]")[0]
    )
    assert configfile.load(new) == cfg
    (p,) = cfg.peers
    assert (p.address, p.tx_address, p.key) == ("10.24.0.1", b"LGm2b", bytes.fromhex(KEY))
    assert p.allowed_ips == ("0.0.0.0/0", "::/0")  # a mobile's peer: by role


@pytest.mark.parametrize(
    ("toml", "key", "says"),
    [
        # one place for each: the old spelling beside [[peer]] is refused by its name
        ('[node]\npeer = "10.24.0.1"\n[[peer]]\naddress = "10.24.0.1"', "node.peer", "[[peer]]"),
        ('[radio]\ntx_address = "LGm2b"\n[[peer]]\nname = "b"', "radio.tx_address", "[[peer]]"),
        ('[[peer]]\nname = "a"\n[[peer]]\nname = "b"', "peer", "one"),
        ('[[peer]]\naddress = "10.25.0.1"', "peer.address", "another address in"),
        ('[[peer]]\ntx_address = "abc"', "peer.tx_address", "address_width"),
        ('[[peer]]\nname = "a b"', "peer.name", "letters"),
        ('[[peer]]\nallowed_ips = ["10.24.0.1/24"]', "peer.allowed_ips", "host bits"),
        ('[[peer]]\nallowed_ips = ["10.99.0.0/24"]', "peer.allowed_ips", "hold 10.24.0.1"),
        ('[[peer]]\nallowed_ips = "10.24.0.0/24"', "peer.allowed_ips", "a list"),
        ("[[peer]]\nport = 5", "peer.port", "one of name"),
    ],
)
def test_peer_tables_are_checked_by_name(tmp_path: Path, toml: str, key: str, says: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[security]\ninsecure = true\n" + toml + "\n")
    with pytest.raises(ConfigError) as err:
        configfile.load(path)
    assert err.value.key == key and says in str(err.value), str(err.value)


def test_a_peer_key_file_others_can_read_is_refused_by_its_peer_key(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text(KEY)
    key.chmod(0o644)
    path = tmp_path / "c.toml"
    path.write_text(f'[[peer]]\nkey_file = "{key}"\n')
    with pytest.raises(ConfigError, match=r"peer\.key_file .*chmod 600"):
        configfile.load(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root (CI runs as root)")
def test_a_key_file_of_another_user_is_refused(tmp_path: Path) -> None:
    """Issue 67: mode 600 but another user's: that user could put a key of theirs there."""
    key = tmp_path / "key"
    key.write_text(KEY)
    key.chmod(0o600)
    os.chown(key, 65534, 65534)
    path = tmp_path / "c.toml"
    path.write_text(f'[[peer]]\nkey_file = "{key}"\n')
    with pytest.raises(ConfigError, match=r"peer\.key_file .*uid 65534.*chown root"):
        configfile.load(path)


def test_a_base_takes_its_mobile_s_address_and_link_local_sources_by_default() -> None:
    """A mobile's kernel sends IPv6 from its link-local address (router solicitations): only
    the mobile can send those over the link, so a base takes them; no other source."""
    base = config.NodeConfig(
        role="base",
        address="10.24.0.1/24",
        peers=(config.PeerConfig(address="10.24.0.2"),),
        insecure=True,
    )
    assert base.peers[0].allowed_ips == ("10.24.0.2/32", "fe80::a18:2/128")


def test_the_allowed_channels_read_as_ranges_or_a_list_and_write_back_as_ranges(
    tmp_path: Path,
) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[security]\ninsecure = true\n[radio]\nchannels = "1-13, 40-60,76,81"\n')
    cfg = configfile.load(f)
    assert cfg.channels == (*range(1, 14), *range(40, 61), 76, 81)
    assert config.channels_text(cfg.channels) == "1-13,40-60,76,81"
    f.write_text("[security]\ninsecure = true\n[radio]\nchannels = [9, 2, 2]\n")
    assert configfile.load(f).channels == (2, 9)
    assert config.NodeConfig(insecure=True).channels == tuple(range(84))  # (the ISM band)
    assert not config.NodeConfig(insecure=True).radio.agile  # (pinned unless asked: design.md §6)


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ('channels = "1-13"\nagile = true', "link's own channels"),  # (76 and 81 outside)
        ('channels = "76,81,82"\nagile = true', "4 channels at least"),
        ('channels = "13-1"', "0..125"),
        ('channels = ""', "0..125"),
    ],
)
def test_a_link_that_may_move_needs_its_home_and_room_in_its_channels(
    tmp_path: Path, toml: str, says: str
) -> None:
    f = tmp_path / "c.toml"
    f.write_text(f"[security]\ninsecure = true\n[radio]\n{toml}\n")
    with pytest.raises(ConfigError, match=says) as err:
        configfile.load(f)
    assert err.value.key == "radio.channels"
