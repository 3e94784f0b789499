"""monitoring/: the Prometheus rules (checked and unit-tested by promtool) and the Grafana
dashboard, both held to the metrics a running daemon really writes: a panel or a rule that
names a metric ``status --prometheus`` does not write fails here."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import required
from daemonlink import ip_packet, make_link
from test_metrics import PROMTOOL

from longge.daemon.metrics import exposition
from longge.daemon.status import NodeStatus
from longge.radio.options import RadioOptions

pytestmark = required(
    None if PROMTOOL else "promtool is missing (Debian package prometheus)", "the rules' test"
)

MONITORING = Path(__file__).resolve().parent.parent / "monitoring"
RULES = MONITORING / "longge-rules.yml"
RULE_TESTS = MONITORING / "longge-rules.test.yml"
DASHBOARD = MONITORING / "longge-dashboard.json"
#: a metric's name where PromQL names one (recorded series are "longge:...": not the daemon's)
NAME = re.compile(r"\blongge_[a-z0-9_]+")


def promtool(*args: str) -> str:
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, timeout=60, cwd=MONITORING
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    query = dash["templating"]["list"][1]["definition"]
    return [*exprs, query.removeprefix("label_values(").split(",")[0]]


@pytest.fixture
def written(tmp_path: Path, air_path: str) -> set[str]:
    """The metric names the daemons of a live link write (with the adaptation on: its
    metrics too), declared or with samples."""
    with make_link(air_path, str(tmp_path), RadioOptions(ard_us=1000, arc=15, adapt=True)) as link:
        packets = [ip_packet(300, i) for i in range(5)]
        assert link.send(link.mtun, packets, to=link.btun) == packets
        link.pump(0.6)
        statuses = {
            "mobile": NodeStatus.of(link.mobile.status()),
            "base": NodeStatus.of(link.base.status()),
        }
    text = exposition(statuses)
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def test_the_rules_pass_promtools_check_and_their_unit_tests() -> None:
    assert "SUCCESS" in promtool("check", "rules", RULES.name)
    assert "SUCCESS" in promtool("test", "rules", RULE_TESTS.name)


def test_every_alert_the_issue_names_is_there_and_unit_tested() -> None:
    """The operator's alerts (link down, loss above the floor, a radio restarting in a loop,
    sealing stopped, a clock stepped, stale metrics, forged or replayed frames, a channel
    move), each with a promtool case that expects it to fire."""
    rules = RULES.read_text()
    tests = RULE_TESTS.read_text()
    for alert in (
        "LongGeLinkDown",
        "LongGePeerDown",
        "LongGeLossAboveFloor",
        "LongGeRadioRestartLoop",
        "LongGeSealingStopped",
        "LongGeClockStepped",
        "LongGeMetricsStale",
        "LongGeFramesRefused",
        "LongGeChannelMoved",
    ):
        assert f"- alert: {alert}\n" in rules, alert
        case = re.search(rf"alertname: {alert}\n\s+exp_alerts:\n\s+- exp_labels", tests)
        assert case is not None, f"no promtool case expects {alert} to fire"


def test_every_metric_the_rules_and_the_dashboard_name_is_one_the_daemon_writes(
    written: set[str],
) -> None:
    named = set(NAME.findall(RULES.read_text()))
    named |= {n for e in dashboard_exprs() for n in NAME.findall(e)}
    assert len(named) >= 25  # (the parse found them: most of the daemon's metrics are used)
    assert named <= written, f"not written by the daemon: {sorted(named - written)}"


def test_the_dashboards_queries_are_promql_and_its_panels_do_not_overlap(tmp_path: Path) -> None:
    """Each panel's query parses (promtool checks it as a recording rule, Grafana's
    variables given values), every panel says what it shows, and none covers another."""
    dash: dict[str, Any] = json.loads(DASHBOARD.read_text())
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for i, expr in enumerate(dashboard_exprs()):
        promql = (
            expr.replace("$__rate_interval", "5m").replace("$__range", "1h").replace("$node", ".*")
        )
        lines += [f"      - record: dashboard:q{i}", f"        expr: {json.dumps(promql)}"]
    (tmp_path / "dashboard.yml").write_text("\n".join(lines) + "\n")
    assert PROMTOOL is not None
    check = subprocess.run(
        [PROMTOOL, "check", "rules", str(tmp_path / "dashboard.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    taken: set[tuple[int, int]] = set()
    for panel in dash["panels"]:
        assert panel["type"] == "row" or panel["description"], panel["title"]
        g = panel["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, panel["title"]
        cells = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & taken, f"{panel['title']} covers another panel"
        taken |= cells
