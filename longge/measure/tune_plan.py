"""What a retry tune tries and what it accepts (``./run.sh tune``): the ARD x ARC grid and each
point's trial lengths (tune.py runs them), the loss and RTT a recommended setting may have and
the loss floor above which one is chosen only when every one is above it (tune_verdict.py
judges by them)."""

from __future__ import annotations

from dataclasses import dataclass

from longge.measure.floor import PDR_LOSS, check_pdr_loss


@dataclass(frozen=True)
class TunePlan:
    ard_us: tuple[int, ...] = (250, 500, 1000, 2500)
    arc: tuple[int, ...] = (0, 1, 2, 3, 5, 10, 15)
    trial_s: int = 5
    probe_s: int = 5
    max_loss: float = 0.001
    max_rtt_factor: float = 2.0
    #: a setting whose loss floor (datagrams lost at every load) is above this is recommended
    #: only when no setting has one below it
    pdr_loss: float = PDR_LOSS
    vs_stream: bool = False  # then measure stream mode too (docs/design.md §4)

    def __post_init__(self) -> None:
        check_pdr_loss(self.pdr_loss)


QUICK_TUNE = TunePlan(ard_us=(250, 2500), arc=(2, 15), trial_s=3, probe_s=3)
