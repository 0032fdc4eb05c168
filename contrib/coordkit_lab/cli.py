"""``coordkit lab``: the project's main job.

``coordkit lab run`` (no arguments: the quick preset on local Spark) → ``lab-report/index.html``;
``coordkit lab list`` shows what can be combined (no Spark needed); ``coordkit lab show DIR``
re-prints a past run; ``coordkit lab package ZIP`` builds the code zip for ``spark-submit``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import click
from click.core import ParameterSource
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from coordkit.cli.filenames import LocalPath
from coordkit.cli.numbers import MAX_INT64, Integer
from coordkit.cli.tables import Column, FittedTable, Kind, output_console
from coordkit.errors import UnknownNameError
from coordkit.plugins import get_plugin_manager
from coordkit.support.terminal import markup
from coordkit_lab.report import load_report, print_report
from coordkit_lab.scenarios import (
    DEFAULT_SEED,
    PRESETS,
    ScenarioSpec,
    expand,
    get_preset,
    split_names,
)
from coordkit_lab.spark import DEFAULT_ENGINE, DEFAULT_MASTER, ENGINES, is_local_master

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager
    from coordkit_lab.spark import Incidents
    from coordkit_lab.study import Study

#: Seeds per parameter set, and Spark tasks, a run may ask for.
MAX_REPLICATES = 1_000
MAX_TASKS = 100_000


def _console() -> Console:
    """A console; when output is not a terminal, wide enough for the key table (not 80)."""
    return output_console(width_when_not_a_terminal=160)


def check_out_directory(out: Path) -> None:
    """Refuse ``--out`` unless it is, or can be made, a directory this process can write in,
    before anything starts; the check leaves nothing behind."""
    try:
        _check_out_directory(out)
    except OSError as exc:  # a name too long, a loop of links, ...
        raise click.BadParameter(f"{out}: {exc.strerror or exc}", param_hint="--out") from None


def _check_out_directory(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise click.BadParameter(f"{out}: exists and is not a directory", param_hint="--out")
    existing = out
    while not existing.exists():
        parent = existing.parent
        if parent == existing:
            break
        existing = parent
    if not existing.is_dir():
        raise click.BadParameter(
            f"{out}: {existing} is a file, not a directory", param_hint="--out"
        )
    try:
        probe = tempfile.mkdtemp(prefix=".coordkit-lab-probe-", dir=existing)
        os.rmdir(probe)
    except OSError as exc:
        raise click.BadParameter(
            f"{out}: cannot create a directory in {existing} ({exc.strerror or exc})",
            param_hint="--out",
        ) from None


@click.group("lab")
def lab() -> None:
    """Compare strategies across generated workloads (on Spark)."""


@lab.command("list")
def list_command() -> None:
    """List the workloads, metrics, strategies and presets the lab can combine."""
    manager = get_plugin_manager()
    console = _console()

    console.print(
        FittedTable(
            [
                Column("name"),
                Column("kind"),
                Column("strategies"),
                Column("parameters (defaults)", Kind.TEXT),
                Column("description", Kind.TEXT),
            ],
            [
                [
                    w.name,
                    w.kind,
                    w.strategy_kind,
                    ", ".join(f"{k}={v}" for k, v in w.defaults.items()),
                    w.description,
                ]
                for w in (reg.value for reg in manager.workloads)
            ],
            title="workloads (coordkit_register_workloads)",
        )
    )
    console.print(
        FittedTable(
            [
                Column("name"),
                Column("unit"),
                Column("better"),
                Column("kinds", Kind.TEXT),
                Column("description", Kind.TEXT),
            ],
            [
                [m.name, m.unit, m.better, ", ".join(m.kinds), m.description]
                for m in (reg.value for reg in manager.metrics)
            ],
            title="metrics (coordkit_register_metrics)",
        )
    )
    rows = []
    kinds = sorted({reg.value.strategy_kind for reg in manager.workloads})
    for kind in kinds:
        workload = next(r.value for r in manager.workloads if r.value.strategy_kind == kind)
        for name in workload.strategies(manager):
            details, plugin = "", ""
            if kind == "assignor":
                registration = manager.assignors.items[name]
                protocols = getattr(registration.value, "protocols", ())
                details = "protocols: " + ", ".join(p.value for p in protocols)
                plugin = registration.plugin
            rows.append([kind, name, details, plugin])
    console.print(
        FittedTable(
            [Column("kind"), Column("name"), Column("details", Kind.TEXT), Column("plugin")],
            rows,
            title="strategies (by the kind of workload that runs them)",
            keys=2,
        )
    )
    rows = []
    for preset in PRESETS.values():
        try:
            count = f"{len(expand(preset, manager)):,}"
        except Exception as exc:  # a broken plugin must not hide the listing
            count = f"? ({type(exc).__name__})"
        rows.append([preset.name, count, preset.description])
    console.print(
        FittedTable(
            [Column("name"), Column("scenarios", Kind.NUMBER), Column("description", Kind.TEXT)],
            rows,
            title="presets (coordkit lab run --preset NAME)",
        )
    )


class _TasksColumn(ProgressColumn):
    """``done/total tasks`` once Spark reports tasks, nothing before; then what Spark recovered
    from, if anything (``312/400 tasks · 1 executor lost · 2 tasks retried``)."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        text = Text(f"{int(task.completed)}/{int(task.total)} tasks", style="progress.download")
        incidents = task.fields.get("incidents")
        if incidents:
            text.append(f" · {incidents}", style="yellow")
        return text


def _progress_bar(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        _TasksColumn(),
        TimeElapsedColumn(),
        console=console,
    )


@attrs.frozen
class _Selection:
    """What ``coordkit lab run`` was asked to run: its scenarios, the study (if one), what
    identifies the selection in the report, and the header line."""

    specs: list[ScenarioSpec]
    study: Study | None
    selection: dict[str, Any]
    run_info: dict[str, Any]
    header: str
    notes: tuple[str, ...] = ()


def _select(
    ctx: click.Context,
    manager: PluginManager,
    *,
    preset: str,
    strategies: list[str] | None,
    workloads: list[str] | None,
    seed: int,
    replicates: int | None,
    workload_file: Path | None,
    from_store: str | None,
) -> _Selection:
    """A preset's scenarios, or a study's (``--workload-file`` / ``--from-store``), with the
    command line's ``-s``, ``--seed`` and ``--replicates`` applied."""
    from coordkit_assignors.lab.study import STUDY_WORKLOAD
    from coordkit_lab.study import (
        open_study,
        preset_selection,
        run_info,
        study_selection,
        with_overrides,
    )

    if workload_file is None and from_store is None:
        if workloads and STUDY_WORKLOAD in workloads:
            raise click.BadParameter(
                f"workload {STUDY_WORKLOAD!r} runs a given group: use --workload-file FILE or "
                "--from-store URL",
                param_hint="'--workloads' / '-w'",
            )
        specs = expand(
            get_preset(preset),
            manager,
            seed=seed,
            strategies=strategies,
            workloads=workloads,
            replicates=replicates,
        )
        selection = preset_selection(preset, specs, seed, replicates)
        header = (
            f"[bold]coordkit lab[/]: preset [cyan]{preset}[/], {len(specs)} scenarios "
            f"({len(selection['workloads'])} workloads × {len(selection['strategies'])} "
            f"strategies), seed {seed}"
        )
        info = {"preset": preset, "seed": seed, **run_info(selection)}
        return _Selection(specs, None, selection, info, header)
    for name, option in (("preset", "'--preset'"), ("workloads", "'--workloads' / '-w'")):
        if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT):
            raise click.BadParameter(
                "a study (--workload-file / --from-store) is its own selection; leave it out",
                param_hint=option,
            )
    given = {
        name: ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)
        for name in ("seed", "replicates")
    }
    study, notes = open_study(manager, workload_file=workload_file, from_store=from_store)
    study = with_overrides(
        study,
        manager,
        strategies=strategies,
        seed=seed if given["seed"] else None,
        replicates=replicates if given["replicates"] else None,
    )
    specs = study.specs(manager)
    selection = study_selection(study)
    groups = len(study.groups)
    header = (
        f"[bold]coordkit lab[/]: study [cyan]{markup(study.name)}[/] ({groups} "
        f"group{'s' if groups != 1 else ''}, {study.partitions:,} partitions), {len(specs)} "
        f"scenarios ({len(study.strategies)} strategies × {study.replicates} "
        f"replicate{'s' if study.replicates != 1 else ''}), seed {study.seed}"
    )
    info = {"study": study.name, "seed": study.seed, **run_info(selection)}
    return _Selection(specs, study, selection, info, header, notes)


@lab.command("run")
@click.option(
    "--preset",
    type=click.Choice(list(PRESETS)),
    default="quick",
    show_default=True,
    help="which scenarios to run",
)
@click.option(
    "--strategies",
    "-s",
    multiple=True,
    metavar="NAMES",
    help="only these strategies (comma separated or repeated; default: all registered)",
)
@click.option(
    "--workloads",
    "-w",
    multiple=True,
    metavar="NAMES",
    help="only these workloads (comma separated or repeated); one the preset lacks runs with "
    "its defaults",
)
@click.option(
    "--master",
    default=None,
    metavar="URL",
    help=f"Spark master (default {DEFAULT_MASTER}; under spark-submit, the one it set)",
)
@click.option(
    "--out",
    type=LocalPath(file_okay=False, path_type=Path),
    default=Path("lab-report"),
    show_default=True,
    help="directory for index.html, summary.json and the Parquet tables",
)
@click.option(
    "--parquet",
    default=None,
    metavar="URI",
    help="where Parquet goes instead of OUT (hdfs://, s3a://, a shared path on a cluster)",
)
@click.option(
    "--seed",
    type=Integer(0, MAX_INT64),
    default=DEFAULT_SEED,
    show_default=True,
    help="the run's seed; every scenario's seed derives from it",
)
@click.option(
    "--replicates",
    type=Integer(1, MAX_REPLICATES),
    default=None,
    help="seeds per parameter set",
)
@click.option(
    "--workload-file",
    type=LocalPath(exists=True, dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="run the study in FILE (.toml or .json): topics, members, events, strategies, seed, "
    "metrics; with --from-store it adds to that cluster",
)
@click.option(
    "--from-store",
    default=None,
    metavar="URL",
    help="study the cluster in this store (Kafka's layout; read, never written): its topics, "
    "replica racks and legacy consumer groups",
)
@click.option("--force", is_flag=True, help="replace a report of another study in --out")
@click.option("--engine", type=click.Choice(ENGINES), default=DEFAULT_ENGINE, hidden=True)
@click.option("--tasks", type=Integer(1, MAX_TASKS), default=None, hidden=True)
@click.pass_context
def run_command(
    ctx: click.Context,
    preset: str,
    strategies: tuple[str, ...],
    workloads: tuple[str, ...],
    master: str | None,
    out: Path,
    parquet: str | None,
    seed: int,
    replicates: int | None,
    workload_file: Path | None,
    from_store: str | None,
    force: bool,
    engine: str,
    tasks: int | None,
) -> None:
    """Run the scenarios of a preset, or a study of your own cluster or groups, on Spark and
    write the report (the main job)."""
    from coordkit_lab.pipeline import run_lab
    from coordkit_lab.spark import require_pyspark
    from coordkit_lab.study import refuse_other_study

    require_pyspark()
    check_out_directory(out)
    console = _console()
    manager = get_plugin_manager()
    try:
        selected = _select(
            ctx,
            manager,
            preset=preset,
            strategies=split_names(strategies),
            workloads=split_names(workloads),
            seed=seed,
            replicates=replicates,
            workload_file=workload_file,
            from_store=from_store,
        )
    except UnknownNameError as exc:
        option = {"strategy": "'--strategies' / '-s'", "workload": "'--workloads' / '-w'"}
        if exc.kind not in option:
            raise
        raise click.BadParameter(str(exc), param_hint=option[exc.kind]) from None
    specs, study = selected.specs, selected.study
    refuse_other_study(out, selected.selection, force=force)
    for note in selected.notes:
        console.print(f"[yellow]note[/]: {markup(note)}")
    console.print(selected.header)
    if master is not None and not is_local_master(master) and parquet is None:
        console.print(
            f"[yellow]note[/]: on {markup(master)} executors write the raw Parquet; "
            f"{markup(out)} must be a directory every node sees, or pass --parquet hdfs://... / "
            "s3a://..."
        )
    progress = _progress_bar(console)
    with progress:
        bar = progress.add_task("starting Spark", total=None)

        def on_started(spark: object) -> None:
            sc = spark.sparkContext  # type: ignore[attr-defined]
            progress.update(bar, description=f"scenarios on {markup(sc.master)}")

        def on_progress(done: int, total: int) -> None:
            progress.update(bar, completed=done, total=total)

        def on_phase(phase: str) -> None:
            progress.update(bar, description=markup(phase))

        def on_incidents(incidents: Incidents) -> None:
            progress.update(bar, incidents=incidents.describe())

        result = run_lab(
            specs,
            out,
            master=master,
            parquet=parquet,
            engine=engine,
            tasks=tasks,
            run_info=selected.run_info,
            manager=manager,
            study=study,
            on_started=on_started,
            on_progress=on_progress,
            on_phase=on_phase,
            on_incidents=on_incidents,
        )
    print_report(result.data, console)
    run = result.data["run"]
    console.print(
        f"{run['scenarios']:,} scenarios in {run['wall_seconds']:.1f} s "
        f"({run['run_seconds']:.1f} s running them on {markup(run['master'])})"
    )
    console.print(f"Report: [bold]{markup(result.page)}[/]")
    console.print(
        f"Parquet: {markup(result.parquet)}/raw (every row), {markup(result.parquet)}/aggregates"
    )
    if result.failed:
        console.print(f"[bold red]{result.failed} scenario(s) failed[/] (listed in the report)")
        sys.exit(1)


@lab.command("show")
@click.argument(
    "directory", type=LocalPath(file_okay=False, path_type=Path), default=Path("lab-report")
)
def show_command(directory: Path) -> None:
    """Print the key table of a past run (its DIRECTORY/summary.json)."""
    data = load_report(directory)
    console = _console()
    run = data.get("run", {})
    what = f"study {run['study']}" if run.get("study") else f"preset {run.get('preset', '?')}"
    console.print(
        f"[bold]coordkit lab[/] run of {markup(run.get('started', '?'))}: {markup(what)}, "
        f"{markup(run.get('scenarios', '?'))} scenarios, seed {markup(run.get('seed', '?'))}"
    )
    print_report(data, console)
    page = directory / "index.html"
    if page.is_file():
        console.print(f"Report: [bold]{markup(page.resolve())}[/]")


@lab.command("package")
@click.argument(
    "target", type=LocalPath(dir_okay=False, path_type=Path), default=Path("coordkit.zip")
)
def package_command(target: Path) -> None:
    """Zip coordkit's packages for `spark-submit --py-files`."""
    from coordkit_lab.spark import build_code_zip

    click.echo(str(build_code_zip(target).resolve()))
