"""Prompt optimization of judges against human labels: recipes, ordinal-aware metrics, honest splits,
enforced budgets, and optimized judges saved as reviewable specs.

The public API is re-exported here; the modules behind it are private (``_api``, ``_recipes``, ...).
"""

from scijudge.optimization._api import (
    OptimizationResult,
    load_optimized_judge,
    load_program,
    optimize,
    optimized_spec,
    save_spec,
)
from scijudge.optimization._experiment import plot_experiment, run_experiment
from scijudge.optimization._recipes import Recipe, load_recipe, recipe_from_dict, resolve_recipe, shipped_recipes_dir

__all__ = [
    "OptimizationResult", "Recipe", "load_optimized_judge", "load_program", "load_recipe", "optimize",
    "optimized_spec", "plot_experiment", "recipe_from_dict", "resolve_recipe", "run_experiment", "save_spec",
    "shipped_recipes_dir",
]
