"""Prompt optimization of judges against human labels: recipes, ordinal-aware metrics, honest splits,
enforced budgets, and optimized judges saved as reviewable specs.

The public API is re-exported here; the modules behind it are private (``_api``, ``_recipes``, ...).
"""

from scijudge.optimization._api import MIN_TEST_UNITS, optimize, prepare, run_plan
from scijudge.optimization._experiment import plot_experiment, run_experiment
from scijudge.optimization._progress import progress_text
from scijudge.optimization._quiet import quiet_to
from scijudge.optimization._recipes import Recipe, SplitSpec, load_recipe, recipe_from_dict, resolve_recipe, shipped_recipes_dir
from scijudge.optimization._registry import OptimizerEntry, OptimizerSettings, register
from scijudge.optimization._result import INTERRUPTED, OptimizationResult
from scijudge.optimization._retry import RetryPolicy, preflight
from scijudge.optimization._robustness import Robustness
from scijudge.optimization._spec_io import load_optimized_judge, load_program, optimized_spec, save_spec

__all__ = [
    "INTERRUPTED", "MIN_TEST_UNITS", "SplitSpec", "preflight", "progress_text", "run_plan",
    "OptimizationResult", "OptimizerEntry", "OptimizerSettings", "Recipe", "RetryPolicy", "Robustness", "load_optimized_judge",
    "load_program", "load_recipe", "optimize", "optimized_spec", "plot_experiment", "prepare", "quiet_to", "recipe_from_dict",
    "register", "resolve_recipe", "run_experiment", "save_spec", "shipped_recipes_dir",
]
