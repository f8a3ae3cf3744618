"""Multi-seed results: run folders → aggregates with confidence intervals (through ``rliable``), plots,
marl-eval's JSON, and the README's generated results tables. The command line is ``scripts/report.py``."""
