"""SMACv2 (Ellis et al. 2022, arXiv:2212.07489): procedurally generated scenarios on the embedded engine.

``StarCraft2Env``'s factory selects them by name (``build("env", "sc2", map_name="protoss_5_vs_5")``);
docs/smacv2.md describes what matches SMACv2 and what does not yet.
"""

from marl.envs.smac.smacv2.scenarios import SCENARIOS, Scenario, get_scenario, is_scenario, list_scenarios

__all__ = ["SCENARIOS", "Scenario", "get_scenario", "is_scenario", "list_scenarios"]
