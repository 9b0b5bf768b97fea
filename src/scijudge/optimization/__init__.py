"""Prompt optimization of judges against human labels: recipes, ordinal-aware metrics, honest splits,
enforced budgets, and optimized judges saved as reviewable specs.

The public API is re-exported here; the modules behind it are private (``_api``, ``_recipes``, ...).
"""

from scijudge.optimization._api import optimize, prepare
from scijudge.optimization._experiment import plot_experiment, run_experiment
from scijudge.optimization._quiet import quiet_to
from scijudge.optimization._recipes import Recipe, load_recipe, recipe_from_dict, resolve_recipe, shipped_recipes_dir
from scijudge.optimization._registry import OptimizerEntry, OptimizerSettings, register
from scijudge.optimization._result import OptimizationResult
from scijudge.optimization._retry import RetryPolicy
from scijudge.optimization._robustness import Robustness
from scijudge.optimization._spec_io import load_optimized_judge, load_program, optimized_spec, save_spec

__all__ = [
    "OptimizationResult", "OptimizerEntry", "OptimizerSettings", "Recipe", "RetryPolicy", "Robustness", "load_optimized_judge",
    "load_program", "load_recipe", "optimize", "optimized_spec", "plot_experiment", "prepare", "quiet_to", "recipe_from_dict",
    "register", "resolve_recipe", "run_experiment", "save_spec", "shipped_recipes_dir",
]
