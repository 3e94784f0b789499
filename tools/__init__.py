"""Hand-run tools: benchmarks of the emulated link and its parts against their physical
bounds, each printing ratios with median and spread. Run as root from the checkout:

    .venv/bin/python -m tools.testbed_link --rounds 5

Type-checked and linted by ./run.sh test (they are not tests: timing targets live here)."""
