"""The ``scijudge`` command line: the app, the wrapper that prints errors as one line, and the registration.

Each command lives in its own module under ``scijudge.commands``; those modules import only typer and the
standard library at module level, so ``scijudge --help`` loads no DSPy, pandas or scipy."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from scijudge.commands._console import console
from scijudge.errors import ScijudgeError
from scijudge.redaction import redact

app = typer.Typer(
    name="scijudge",
    help="Optimizable LLM-as-a-judge modules for scientific text.\n\n"
         "Example: scijudge judge items.jsonl --judge 'yescieval.qa.*' --model openai/gpt-4o-mini",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        from scijudge import __version__

        typer.echo(f"scijudge {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main_options(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_show_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Optimizable LLM-as-a-judge modules for scientific text.

    Example: scijudge judge items.jsonl --judge 'yescieval.qa.*' --model openai/gpt-4o-mini
    """


def _fail(exc: BaseException) -> None:
    """One line, no traceback: credentials redacted, and text from data never read as terminal markup."""
    console.print(f"[bold red]error:[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True)
    raise typer.Exit(getattr(exc, "exit_code", 2))


def _option_flags(fn) -> dict[str, str]:
    """Parameter name -> its long option (``layout`` -> ``--layout``) of a command function."""
    import inspect
    import typing

    flags: dict[str, str] = {}
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    for name in inspect.signature(fn).parameters:
        flag = "--" + name.replace("_", "-")
        for meta in getattr(hints.get(name), "__metadata__", ()):
            decls = [d for d in getattr(meta, "param_decls", None) or () if d.startswith("--")]
            if decls:
                flag = decls[0].split("/")[0]
            elif type(meta).__name__ == "ArgumentInfo":
                flag = name.upper()
        flags[name] = flag
    return flags


def _name_option(exc: ScijudgeError, flags: dict[str, str]) -> ScijudgeError:
    """An input error about a command's own option names the option as typed (``--layout: ...``), not as a
    field of some model (``field 'layout'``)."""
    from scijudge.errors import InputError

    if not isinstance(exc, InputError) or exc.file or exc.line is not None or not exc.field:
        return exc
    flag = flags.get(exc.field.replace("-", "_"))
    if flag is None:
        return exc
    renamed = InputError(exc.reason if exc.reason.startswith(flag) else f"{flag}: {exc.reason}")
    renamed.exit_code = exc.exit_code
    return renamed


def _os_error(exc: OSError) -> ScijudgeError:
    """A file-system failure (a path under a file, no permission, disk full) as one line naming the path."""
    from scijudge.errors import InputError

    where = exc.filename if exc.filename is not None else None
    return InputError(f"cannot use this path: {exc.strerror or type(exc).__name__}", file=where)


# Commands that load judge specs: they take --trust-spec-code (spec code outside scijudge runs only then).
SPEC_COMMANDS = frozenset({"judge", "demo", "calibrate", "perturb", "compliance", "optimize", "distill"})
_TRUST_HELP = ("Run code that specs name outside scijudge (prepare = 'module:function', output = 'module:Class'). "
               "Specs with code are code: only for specs you trust.")


def _with_trust_option(fn, wrapper):
    """Give ``wrapper`` a ``--trust-spec-code`` option (declared in its signature, read before ``fn`` runs)."""
    import inspect

    option = inspect.Parameter("trust_spec_code", inspect.Parameter.KEYWORD_ONLY, default=False,
                               annotation=Annotated[bool, typer.Option("--trust-spec-code", help=_TRUST_HELP)])
    signature = inspect.signature(fn, eval_str=True)
    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), option])
    wrapper.__annotations__ = {**getattr(fn, "__annotations__", {}), "trust_spec_code": option.annotation}
    return wrapper


def command(*args, **kwargs):
    """Register a CLI command whose ScijudgeErrors are printed as one clear line, not a traceback."""
    import functools

    name = args[0] if args else kwargs.get("name")

    def decorate(fn):
        trust_option = name in SPEC_COMMANDS and "trust_spec_code" not in getattr(fn, "__annotations__", {})

        @functools.wraps(fn)
        def wrapper(*a, **k):
            if trust_option:
                from scijudge.spec.judge_spec import trust_spec_code

                if k.pop("trust_spec_code", False):
                    trust_spec_code(True)
            try:
                return fn(*a, **k)
            except ScijudgeError as exc:
                _fail(_name_option(exc, _option_flags(fn)))
            except OSError as exc:
                _fail(_os_error(exc))

        if trust_option:
            _with_trust_option(fn, wrapper)
        return app.command(*args, **kwargs)(wrapper)

    return decorate

def _register_commands() -> None:
    """Every command, in the order ``scijudge --help`` lists them; each module holds one command's code."""
    from scijudge.commands.batches import batches_cmd
    from scijudge.commands.calibrate import calibrate_cmd, perturb_cmd
    from scijudge.commands.compliance import compliance_cmd
    from scijudge.commands.demo import demo_cmd
    from scijudge.commands.distill import distill_cmd
    from scijudge.commands.drift import drift_cmd
    from scijudge.commands.estimate import estimate_cmd
    from scijudge.commands.export import export_cmd
    from scijudge.commands.figure_metric import figure_metric_command
    from scijudge.commands.import_judgments import import_judgments_cmd
    from scijudge.commands.import_lematerial import import_lematerial_cmd
    from scijudge.commands.judge import judge_cmd
    from scijudge.commands.judges import judges_cmd
    from scijudge.commands.jury import jury_cmd
    from scijudge.commands.optimize import optimize_cmd
    from scijudge.commands.robustness import robustness_cmd
    from scijudge.commands.select_labels import select_labels_cmd
    from scijudge.commands.schema import schema_cmd

    command("judges")(judges_cmd)
    command("judge")(judge_cmd)
    command("export")(export_cmd)
    command("schema")(schema_cmd)
    command("demo")(demo_cmd)
    command("import-lematerial")(import_lematerial_cmd)
    command("calibrate")(calibrate_cmd)
    command("perturb")(perturb_cmd)
    command("compliance")(compliance_cmd)
    command("import-judgments")(import_judgments_cmd)
    command("robustness")(robustness_cmd)
    command("optimize")(optimize_cmd)
    command("figure-metric")(figure_metric_command)
    command("estimate")(estimate_cmd)
    command("batches")(batches_cmd)
    command("select-labels")(select_labels_cmd)
    command("jury")(jury_cmd)
    command("drift")(drift_cmd)
    command("distill")(distill_cmd)


_register_commands()


def main() -> None:  # pragma: no cover - console script entry point
    from scijudge.lm._dspy_compat import use_local_cost_map

    use_local_cost_map()
    app()
