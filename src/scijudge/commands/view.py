"""CLI command `scijudge view`: browse run stores and label items in the browser, or export a static site."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scijudge.errors import InputError


def view_cmd(
    runs: Annotated[list[Path], typer.Argument(help="Run stores to show (read-only: their bytes never change).")],
    labels: Annotated[list[Path] | None, typer.Option("--labels", "-l", help="Human labels (JSONL or CSV) to show beside the judgments and calibrate against; repeatable.")] = None,
    picks: Annotated[list[Path] | None, typer.Option("--picks", help="picks.csv from `select-labels` (or escalated items in its format): label these first, highest pi first; repeatable, in order.")] = None,
    label_out: Annotated[Path | None, typer.Option("--label-out", help="Turn labelling on at /label: labels are appended to this JSONL file (load_labels, calibrate and estimate --picks read it).")] = None,
    annotator: Annotated[str | None, typer.Option("--annotator", help="Your name on the labels you write (default: your user name).")] = None,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on; 0 picks a free one.")] = 0,
    host: Annotated[str, typer.Option("--host", help="Address to listen on; anything but loopback is reachable from other machines (warned).")] = "127.0.0.1",
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Do not open the browser.")] = False,
    items: Annotated[list[Path] | None, typer.Option("--items", help="Items JSONL whose inputs the item pages show (default: the items file each store recorded).")] = None,
    judge: Annotated[list[str] | None, typer.Option("--judge", "-j", help="Label only these judges (default: every judge of the stores); repeatable.")] = None,
    export: Annotated[Path | None, typer.Option("--export", help="Write a self-contained read-only site to this new folder instead of serving.")] = None,
    n_boot: Annotated[int, typer.Option("--n-boot", min=0, help="Bootstrap resamples of the calibration page (as calibrate --n-boot).")] = 1000,
    target_width: Annotated[float | None, typer.Option("--target-width", help="With --label-out: show each judge's anytime-valid interval (estimate --sequential's) above the queue and stop the queue, 'certain enough', once every judge's is this wide.")] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="1 - confidence of the --target-width intervals.")] = 0.1,
) -> None:
    """Browse run stores and label items in the browser: runs, a paged items table, one item, calibration, /label.

    Prints `scijudge view: http://127.0.0.1:PORT/?token=...` first; every request needs that token (a cookie after
    the first visit). With --label-out, /label shows the --picks items first, then the unlabelled ones: keys 1-9
    (0 for 10) give the score, s skips, u undoes; judgments stay hidden until you label.

    Example: scijudge view runs/demo.sqlite --label-out my_labels.jsonl   (after `scijudge demo`; add --labels datasets/expertqa/labels.jsonl for the experts' labels and the calibration page)
    """
    from scijudge.view import check_installed

    check_installed()
    from scijudge.view.app import build_app, make_viewer

    if export is not None and label_out is not None:
        raise InputError("--export writes a read-only site: leave out --label-out", field="label_out")
    name = annotator
    if name is None:
        import getpass

        try:
            name = getpass.getuser()
        except (OSError, KeyError):
            name = "annotator"
    if not name.strip():
        raise InputError("--annotator must not be empty", field="annotator")
    viewer = make_viewer(runs, labels=labels or [], picks=picks or [], label_out=label_out, annotator=name,
                         items=items, judges=judge)
    viewer.n_boot = n_boot
    if target_width is not None:
        if label_out is None or not target_width > 0 or not 0 < alpha < 1:
            raise InputError("--target-width needs --label-out, a width > 0 and 0 < --alpha < 1",
                             field="label_out" if label_out is None else "target_width")
        from scijudge.view.certainty import Certainty

        Certainty(viewer, target_width, alpha, judge).install()
    if export is not None:
        from scijudge.view.export import export_site

        counts = export_site(viewer.site, export, n_boot=n_boot)
        typer.echo(f"wrote {export}: " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
        return
    from scijudge.view.server import serve

    try:  # with --label-out: the judges' scales and the picks are read once the URL is printed (seconds of imports)
        serve(build_app(viewer), viewer.token, host=host, port=port, open_browser=not no_browser,
              background=viewer.warm)
    except KeyboardInterrupt:
        pass
    finally:
        viewer.site.view.close()
