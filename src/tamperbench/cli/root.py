"""The ``tamperbench`` command: suites mount their own typer sub-apps here.

``main`` is the console entry point: it turns a :class:`UserError` into one stderr line and
exit status 2, so bad input never shows a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from tamperbench.cli.options import ChatTemplateOpt, DeviceOpt, DtypeOpt, ModelOpt, NewOpt
from tamperbench.errors import UserError, printable

app = typer.Typer(
    help="tamperbench: do language models notice tampering with their own words or computation?",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()


def _say(text: str) -> None:
    """One line naming user paths or model names: control characters escaped, no rich markup read."""
    console.print(printable(text), markup=False, highlight=False)


def _mount_suites() -> None:
    """Mount every registered suite's typer sub-app (see :mod:`tamperbench.suites`).

    Suite CLI modules import only typer and rich at module level, so this keeps ``--help`` fast;
    a built-in suite whose package is absent from this install is skipped, not an error.
    """
    from tamperbench.suites import registered

    for suite in registered().values():
        try:
            sub_app = suite.part("cli")
        except UserError:
            if suite.cli.startswith("tamperbench."):
                continue
            raise
        app.add_typer(sub_app, name=suite.name, help=suite.help)


@app.command()
def export(
    run: Annotated[Path, typer.Argument(help="Run directory.")],
    fmt: Annotated[str, typer.Option("--format", help="parquet, csv, jsonl, hf (a Hugging Face dataset folder) or inspect (an inspect-ai log, FILE.eval).")] = "parquet",
    out: Annotated[Path, typer.Option("--out", help="Output file (one per table, suffixed, if several); a new folder for hf.")] = Path("export.parquet"),
    table: Annotated[Optional[str], typer.Option("--table", help="Export only this table.")] = None,
    raw: Annotated[bool, typer.Option("--raw", help="CSV: write text cells untouched (by default a cell starting "
                                      "with = + - @ tab or CR gets a leading apostrophe, so spreadsheets show it "
                                      "as text, never run it as a formula).")] = False,
) -> None:
    """Export a run's records, with provenance joined in."""
    from tamperbench.export.tables import export_run

    if fmt == "inspect":
        if table is not None:
            raise UserError("--table: not used with --format inspect (the run's main table becomes the samples)")
        from tamperbench.inspect_ext.export import export_inspect

        name, path, n = export_inspect(run, out)
        _say(f"{name}: {n} samples -> {path} (open with: inspect view --log-dir {path.parent})")
        return
    if fmt == "hf":
        if table is not None:
            raise UserError("--table: not used with --format hf (every record table becomes one config)")
        from tamperbench.export.hf import export_hf

        for name, path, n in export_hf(run, out):
            _say(f"{name}: {n} rows -> {path}")
        _say(f"dataset card: {out / 'README.md'}; load with datasets.load_dataset({str(out)!r}, CONFIG)")
        return
    if raw and fmt != "csv":
        raise UserError(f"--raw: only used with --format csv (got --format {fmt})")
    for name, path, n in export_run(run, fmt, out, table, raw=raw):
        _say(f"{name}: {n} rows -> {path}")


@app.command()
def answer(
    question: Annotated[str, typer.Argument(help="The question to answer.")] = "what causes the phases of the moon?",
    model: ModelOpt = "embedded",
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", help="Token budget.")] = 48,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = None,
    chat_template: ChatTemplateOpt = None,
) -> None:
    """Answer one question greedily; print every token with its surprisal and entropy."""
    from tamperbench.models import load_backend
    from tamperbench.cli.answer import answer_token_stats, token_table

    if max_new_tokens < 1:
        raise UserError(f"--max-new-tokens: must be at least 1, got {max_new_tokens}")
    backend = load_backend(model, device=device, dtype=dtype, chat_template=chat_template)
    from tamperbench.models.protocols import ensure_fits

    prompt = backend.chat_ids([{"role": "user", "content": question}])
    ensure_fits(len(prompt), max_new_tokens, backend.max_context, "question")  # before any compute
    stats = answer_token_stats(backend, question, max_new_tokens=max_new_tokens)
    console.print(token_table(stats, f"{backend.provenance.source} ({backend.provenance.sha256[:12]}): {question}"))
    console.print("answer: " + backend.decode([s.token_id for s in stats]))


ExecutorOpt = Annotated[str, typer.Option("--executor", help="inprocess (default) or ray: spread work units over "
                                          "Ray actors, one model per worker; the driver alone writes the store.")]
AddressOpt = Annotated[Optional[str], typer.Option("--address", help="Ray cluster address (default: start a local one).")]
WorkersOpt = Annotated[int, typer.Option("--workers", min=1, max=1024, help="Ray actors (each loads the model once).")]


@app.command("run")
def run_spec(
    spec_file: Annotated[Path, typer.Argument(help="A spec.json (e.g. copied from another run and edited).")],
    out: Annotated[Path, typer.Option("--out", help="Run directory (resumed when it holds the same spec).")],
    new: NewOpt = False,
    executor: ExecutorOpt = "inprocess",
    address: AddressOpt = None,
    workers: WorkersOpt = 2,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the suite's plan (work, tokens, an ETA); "
                                                            "decode and store nothing.")] = False,
) -> None:
    """Run (or resume) a suite from a spec file; its "suite" field says which."""
    from tamperbench.runs.driver import dry_run_registered, run_registered
    from tamperbench.runs.ray_executor import executor_from_options
    from tamperbench.spec_base import load_spec_file, read_spec_json
    from tamperbench.suites import runnable_suite

    ex = executor_from_options(executor, address, workers)
    raw = read_spec_json(spec_file)  # a missing file or bad JSON: one line
    suite = runnable_suite(raw.get("suite"), f"{spec_file}: field 'suite'")
    spec = load_spec_file(spec_file, suite.spec_model())  # validated before any run directory exists
    if dry_run:  # the suite's plan (runs/driver.py); a suite without one says so in one line
        dry_run_registered(suite, spec, out, echo=console.print)
        return
    run_registered(suite, spec, out, new=new, executor=ex)
    if suite.tables is not None:
        suite.part("tables")(out, console)


@app.command()
def sweep(
    sweep_file: Annotated[Path, typer.Argument(help='{"suite": ..., "models": [...], "spec": {...}}')],
    out: Annotated[Path, typer.Option("--out", help="Folder: one resumable run directory per model.")],
    new: NewOpt = False,
    executor: ExecutorOpt = "inprocess",
    address: AddressOpt = None,
    workers: WorkersOpt = 2,
) -> None:
    """Run one suite over a list of models (the whole matrix, one command); resumable per model."""
    from tamperbench.runs.ray_executor import executor_from_options
    from tamperbench.runs.sweep import run_sweep

    for model, run_dir in run_sweep(sweep_file, out, executor=executor_from_options(executor, address, workers), new=new):
        _say(f"{model}: {run_dir}")


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(help="Run directories of any registered suite.")],
    out: Annotated[Path, typer.Option("--out", help="Site folder (open its index.html; no server needed).")] = Path("report"),
) -> None:
    """Build the static report site: leaderboards, run provenance, plots and trial viewers."""
    from tamperbench.report.site import build_site

    index, problems = build_site(runs, out)
    for p in problems:
        print(f"warning: left out of the report: {printable(str(p))}", file=sys.stderr)
    _say(f"report: {index}")


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", help="Folder for the demo's runs and report.")] = Path("runs/demo"),
    model: ModelOpt = "embedded",
) -> None:
    """The main job on the embedded model: answer, Sleight of Word, jury, Exact Words, OWMI and its claims, report."""
    from tamperbench.cli.demo import run_demo

    run_demo(app, out, model)


_mount_suites()
from tamperbench.cli.models import app as _models_app  # noqa: E402  (typer + rich only at import)

app.add_typer(_models_app, name="models")
# Benchmark adapters are a shared layer below the suites (not a suite): mounted directly.
from tamperbench.tasks.cli import app as _bench_app  # noqa: E402  (typer + rich only at import)

app.add_typer(_bench_app, name="bench", help="Benchmark adapters: list, check and score twelve public benchmarks.")
# The OpenAI-compatible server (FastAPI/uvicorn are imported only when it starts).
from tamperbench.serve.cli import serve as _serve  # noqa: E402

app.command("serve")(_serve)


def main() -> None:
    """Console entry point: expected failures (UserError, OS and decoding errors) are one ``error:``
    line and exit 2; a bug is one line and exit 1, its traceback shown with ``--debug`` (errors.run_cli)."""
    from tamperbench.errors import run_cli

    run_cli(app)


if __name__ == "__main__":
    main()
