"""The ``scijudge`` command line: the app, its commands (each loaded when used), and the wrapper that prints
errors as one line.

Each command lives in its own module under ``scijudge.commands``, imported only when that command runs or prints
its own help: ``scijudge --help`` lists every command from the table below (``COMMANDS``) without importing any of
them, and the command modules import only typer and the standard library at module level, so no path through
``--help`` loads DSPy, pandas or scipy."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from importlib import import_module
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info
from typer.models import CommandInfo

from scijudge.errors import ScijudgeError

# Every command, in the order ``scijudge --help`` lists them: name -> (its module under scijudge.commands, its
# function, the first paragraph of its docstring: what the command list shows). tests/commands/test_cli_help.py
# checks the table against the modules (every command function is here, each summary is its docstring's).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "judges": ("judges", "judges_cmd",
               "List the shipped judges: name, family, inputs and a one-line description."),
    "judge": ("judge", "judge_cmd",
              "Judge every item with every judge; each judgment is saved to the run store as it completes."),
    "export": ("export", "export_cmd",
               "Export the current judgment of every (item, judge, part, model, endpoint) of a run store to JSONL "
               "or CSV."),
    "schema": ("schema", "schema_cmd", "Print the JSON Schema of one line of the canonical item format."),
    "demo": ("demo", "demo_cmd",
             "The offline main job: judge bundled items end to end, show the judgments, and compare them with experts."),
    "import-lematerial": ("import_lematerial", "import_lematerial_cmd",
                          "Import LeMaterial's LLM-judge and human evaluations as a run store plus human labels."),
    "calibrate": ("calibrate", "calibrate_cmd",
                  "Compare judges with human labels: agreement, bias, intervals, paired tests, robustness and a "
                  "report."),
    "perturb": ("calibrate", "perturb_cmd",
                "Write adversarial answer variants per rubric (YESciEval recipe) plus a prompt-injection probe."),
    "compliance": ("compliance", "compliance_cmd",
                   "Print checklist compliance per report and per axis, with coverage, tokens and cost."),
    "import-judgments": ("import_judgments", "import_judgments_cmd",
                         "Import judgments made by any tool (released rating files, logs) so they can be calibrated "
                         "and stress-tested."),
    "robustness": ("robustness", "robustness_cmd",
                   "Robustness to perturbed answers per model and judge (and pooled per model): drop, "
                   "P(original > variant), AUC."),
    "optimize": ("optimize", "optimize_cmd",
                 "Optimize a judge's instructions and demos against human labels; report held-out agreement "
                 "before/after."),
    "figure-metric": ("figure_metric", "figure_metric_command",
                      "Compare extracted plot series with ground truth and print the per-series RMSE/MAE table."),
    "estimate": ("estimate", "estimate_cmd",
                 "Mean human score per (judge, model, group): PPI++ from judge scores plus a random subset of human "
                 "labels,\nbeside human-only and judge-only estimates; conformal sets of human scores per judgment; "
                 "labels needed."),
    "batches": ("batches", "batches_cmd",
                "List the provider batches a run created: status, counts, strategy, price basis."),
    "select-labels": ("select_labels", "select_labels_cmd",
                      "Choose the items to label so that `estimate --picks` gets the most certainty per label."),
    "jury": ("jury", "jury_cmd",
             "Aggregate several judges into a jury, stored as a run (model jury:NAME) that calibrate, estimate and "
             "export read."),
    "cascade": ("cascade", "cascade_cmd",
                "Trust a judge where it is confident enough to meet a target agreement with humans; escalate the "
                "rest."),
    "drift": ("drift", "drift_cmd",
              "Judge drift per judge and model: n, flip rate (exact and beyond +-1), kappa between runs, mean shift "
              "with a\n95% paired-t interval."),
    "distill": ("distill", "distill_cmd",
                "Distil a judge into a small local LoRA judge, from human labels or a teacher's stored judgments."),
    "serve-fake": ("serve_fake", "serve_fake_cmd",
                   "Serve a fake OpenAI-compatible judge model on 127.0.0.1 until Ctrl-C: its answers fit each "
                   "request's schema\nand mean nothing."),
    "view": ("view", "view_cmd",
             "Browse run stores and label items in the browser: runs, a paged items table, one item, calibration, "
             "/label."),
}


class _Commands(MutableMapping[str, Any]):
    """A group's commands by name. Every name in ``COMMANDS`` is there from the start; its module is imported,
    and its click command built, when it is first looked up. While the group prints its own help (``listing``),
    a command not built yet is looked up as a stand-in holding only its name and summary: all the list shows."""

    def __init__(self, built: MutableMapping[str, Any], markup_mode: Any) -> None:
        self._names = list(COMMANDS)
        self._built = dict(built)
        self._markup_mode = markup_mode
        self.listing = False

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in self._names:
                raise KeyError(name)
            if self.listing:
                return TyperCommand(name, help=COMMANDS[name][2], rich_markup_mode=self._markup_mode)
            self._built[name] = _build_command(name, self._markup_mode)
        return self._built[name]

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter([*self._names, *(name for name in self._built if name not in self._names)])

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._built.pop(name, None)
        if name in self._names:
            self._names.remove(name)


class LazyGroup(TyperGroup):
    """The top-level group: lists every command of ``COMMANDS`` and imports a command's module only when that
    command is resolved (to run, or to print its own help)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lazy = _Commands(self.commands, self.rich_markup_mode)
        self.commands = self._lazy

    def get_help_option(self, ctx: Any) -> Any:
        """typer's ``--help``, defaulting to False instead of None: typer (0.29) builds a pydantic adapter to
        coerce a missing flag's None before it checks for None (it then returns None unchanged), and that
        import is most of what ``scijudge COMMAND --help`` would cost; a False flag is not coerced."""
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names only: TyperGroup's reads every command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._lazy.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._lazy.listing = False


app = typer.Typer(
    name="scijudge",
    cls=LazyGroup,
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
    from rich.markup import escape

    from scijudge.commands import console
    from scijudge.redaction import redact

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
        flag = "--" + name.rstrip("_").replace("_", "-")  # from_ (a Python keyword) is --from
        for meta in getattr(hints.get(name), "__metadata__", ()):
            given = (getattr(meta, "default", None), *(getattr(meta, "param_decls", None) or ()))  # typer: 1st = default
            decls = [d for d in given if isinstance(d, str) and d.startswith("--")]
            if decls:
                flag = decls[0].split("/")[0]
            elif type(meta).__name__ == "ArgumentInfo":
                flag = name.upper()
        flags[name] = flag
    return flags


# A library keyword argument whose command-line option has another name (``select_labels(tau=)`` is
# ``select-labels --floor``): the library's errors name the keyword, the command line names its option.
_OPTION_OF_KEYWORD = {"tau": "floor", "width": "target_width"}


def _flag_of(field: str, flags: dict[str, str]) -> str | None:
    """The option (or argument) a message's field names: as the parameter is spelt (``batch_fallback``), as typed
    (``batch-fallback``, ``FILE``), a Python keyword's parameter (``from`` -> ``from_``), a plural (``rubrics``) or
    a library keyword the option renames (``tau`` -> ``--floor``)."""
    key = field.lstrip("-").replace("-", "_")  # 'labels', 'label-out' or '--judge' as typed
    for candidate in (key, key.lower(), key + "_", key.rstrip("s"), _OPTION_OF_KEYWORD.get(key, "")):
        if candidate in flags:
            return flags[candidate]
    return None


def _name_option(exc: ScijudgeError, flags: dict[str, str]) -> ScijudgeError:
    """An input error about a command's own option names the option as typed (``--layout: ...``), not as a
    field of some model (``field 'layout'``); a library message says the options, not its keyword arguments."""
    from scijudge.commands import in_cli_words
    from scijudge.errors import InputError

    if not isinstance(exc, InputError):
        return exc
    reason = in_cli_words(exc.reason)
    # only an error located nowhere else is about an option: a file's field is that file's (a labels file's judge)
    flag = _flag_of(exc.field, flags) if exc.field and not exc.file and exc.line is None else None
    if flag is None:
        if reason == exc.reason:
            return exc
        renamed = InputError(reason, file=exc.file, line=exc.line, field=exc.field)
    else:
        renamed = InputError(reason if flag in reason else f"{flag}: {reason}")
    renamed.exit_code = exc.exit_code
    return renamed


def _quiet_stdout() -> None:
    """Point standard output at the null device, so the interpreter's last flush into the closed pipe neither
    prints "Exception ignored" nor changes the exit code (the way Python's documentation advises for SIGPIPE)."""
    import os
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (a test's captured output)
        pass


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


def command(*args, on: typer.Typer | None = None, **kwargs):
    """Register a CLI command whose ScijudgeErrors are printed as one clear line, not a traceback (on ``app``
    unless ``on`` names another Typer)."""
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
            except BrokenPipeError:  # the reader went away (``scijudge calibrate | head``): it had what it wanted
                _quiet_stdout()
                raise typer.Exit(0) from None
            except SystemExit as exc:  # rich's Console ends a write into a closed pipe with exit 1: the same case
                if isinstance(exc.__context__, BrokenPipeError):
                    _quiet_stdout()
                    raise typer.Exit(0) from None
                raise
            except OSError as exc:
                _fail(_os_error(exc))
            except KeyboardInterrupt:  # a command without its own Ctrl-C handling: one line, exit 130
                from scijudge.commands import console

                console.print(f"interrupted: scijudge {name} stopped before it finished", highlight=False)
                raise typer.Exit(130) from None

        if trust_option:
            _with_trust_option(fn, wrapper)
        return (on or app).command(*args, **kwargs)(wrapper)

    return decorate


def _build_command(name: str, markup_mode: Any) -> Any:
    """The click command of one command of ``COMMANDS``: its module imported, its function wrapped by
    ``command`` and registered on a Typer of its own (once per process), then built as typer builds ``app``'s."""
    info = _INFOS.get(name)
    if info is None:
        module, function, _ = COMMANDS[name]
        registry = typer.Typer()
        command(name, on=registry)(getattr(import_module(f"scijudge.commands.{module}"), function))
        info = _INFOS[name] = registry.registered_commands[0]
    return get_command_from_info(info, pretty_exceptions_short=app.pretty_exceptions_short,
                                 rich_markup_mode=markup_mode)


_INFOS: dict[str, CommandInfo] = {}


def main() -> None:  # pragma: no cover - console script entry point
    """The console script. When the command is done, the collector is frozen: at exit the interpreter runs full
    collections over every object still alive (the libraries' own: millions once pandas, scipy, scikit-learn and
    matplotlib are imported), only to free memory the OS takes back anyway, about 0.6 s of CPU after a calibrate.
    Frozen objects are skipped; atexit handlers and weakref finalizers still run, and every command closes its
    files and stores itself."""
    import gc

    from scijudge.commands import run_as_console_script
    from scijudge.lm.dspy_compat import use_local_cost_map

    use_local_cost_map()
    run_as_console_script()
    try:
        app()
    finally:
        gc.freeze()
