"""``scijudge view``: a local web app over run stores (runs, items, one item, calibration) with labelling at
``/label``, and its static export. Above ``report/``: it reads stores read-only (``stores``) and shows what the
metrics, estimation and report layers compute, never a number of its own.

Modules: ``stores`` (paged SQL over read-only stores), ``items`` (items files by offset), ``labelling`` (the label
file and the queue), ``pages`` (Jinja2 pages, autoescaped), ``figures`` (the calibration page), ``prompts`` (a
judgment's prompt, rebuilt from its spec), ``app`` (the
Starlette app and its token gate), ``server`` (uvicorn, the URL line, the browser), ``export`` (the static site).
Starlette, uvicorn, Jinja2 and filelock are the ``view`` extra: ``pip install 'scijudge[view]'``.
"""

from __future__ import annotations

NEEDS = ("starlette", "uvicorn", "jinja2", "filelock")


def check_installed() -> None:
    """Refuse clearly when the ``view`` extra is missing."""
    import importlib.util

    from scijudge.errors import InputError

    missing = [name for name in NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise InputError(f"scijudge view needs {', '.join(missing)}: pip install 'scijudge[view]'")
