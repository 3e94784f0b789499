"""The experiments that bring up testbeds of their own (several mobiles; a schedule run with
each setting; a stranger's radio beside the link; Wi-Fi switched on over a link that moves),
not the battery's one testbed: one list for the command that runs them (after the battery's,
in its folder, with ``all``) and for ``plot``, which judges and draws their files again. Each
module has ``NAME``, ``QUESTION``, ``check_values``, ``run``, ``verdict`` and ``plot``."""

from __future__ import annotations

from types import ModuleType


def modules() -> tuple[ModuleType, ...]:
    from longge.measure import (  # (each imports measure's other modules: not at load)
        adaptive_experiment,
        adaptive_stream_experiment,
        agility_experiment,
        hostile_experiment,
        multinode_experiment,
    )

    return (
        multinode_experiment,
        adaptive_experiment,
        adaptive_stream_experiment,
        hostile_experiment,
        agility_experiment,
    )
