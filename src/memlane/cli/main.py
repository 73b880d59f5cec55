"""The `memlane` command. Sub-commands live in small modules registered here."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from memlane.cli import bench, context, demo, notes, serve, sessions
from memlane.cli.common import CliState, err_console
from memlane.cli.exit_codes import cli_message, exit_code_for
from memlane.errors import MemlaneError

app = typer.Typer(
    name="memlane",
    help="Conversation memory for LLM agents: store, search and build context from chats.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
eval_app = typer.Typer(help="Evaluate retrieval and summaries on LoCoMo, and the EN/DE language understanding.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks: write path, search, store, server load.")
app.add_typer(eval_app, name="eval")
app.add_typer(bench_app, name="bench")


@app.callback()
def _root(
    ctx: typer.Context,
    store: str | None = typer.Option(
        None, "--store", "--db", envvar="MEMLANE_STORE",
        help="Database: a SQLite path, sqlite:///path, memory:// or postgresql://...",
    ),
    config: str | None = typer.Option(
        None, "--config", help="Config file (default ~/.memlane/config.yaml)."
    ),
    key_env: str | None = typer.Option(
        None, "--key-env",
        help="Environment variable holding the key of an encrypted store (default: MEMLANE_KEY).",
    ),
    tenant: str | None = typer.Option(
        None, "--tenant", envvar="MEMLANE_TENANT",
        help="The tenant whose session ids the commands take and show (ids are per tenant; default: default).",
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug output."),
) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING)
    if tenant is not None:
        from memlane.validation import check_identifier

        check_identifier(tenant, "--tenant")
    ctx.obj = CliState(store=store, config=config, key_env=key_env, tenant=tenant)


sessions.register(app)
context.register(app)
demo.register(app)
bench.register(bench_app)
__import__("memlane.cli.recall", fromlist=["register"]).register(app, eval_app, bench_app)
serve.register(app, bench_app)
__import__("memlane.cli.pg", fromlist=["register"]).register(app, bench_app)
notes.register(app)
__import__("memlane.cli.doctor", fromlist=["register"]).register(app)
__import__("memlane.cli.crypt", fromlist=["register"]).register(app)


@eval_app.command("summaries")
def _eval_summaries(
    files: list[Path] = typer.Argument(..., help="LoCoMo JSON files."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """ROUGE-1/2/L of memlane's session summaries vs LoCoMo's gold, beside a lead baseline."""
    from memlane.eval.summaries import run_summaries_eval

    print(run_summaries_eval(files, as_json))


@eval_app.command("references")
def _eval_references(
    file: Path | None = typer.Argument(
        None, help="JSONL of labelled cases (default: memlane's EN/DE dev set)."
    ),
    split: str = typer.Option("all", "--split", help="dev (tuned on), held or held2 (not tuned on), or all."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    misses: bool = typer.Option(False, "--misses", help="List the cases it got wrong."),
) -> None:
    """Reference resolution: accuracy, clarification precision/recall, false positives, per category and language."""
    from memlane.cli.language import print_references_eval

    print_references_eval(file, split, as_json, misses)


@eval_app.command("topics")
def _eval_topics(
    file: Path | None = typer.Argument(
        None, help="JSONL of labelled conversations (default: memlane's EN/DE set)."
    ),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder spec, or none for stems only."),
    threshold: float = typer.Option(0.35, "--threshold", min=0.0, max=1.0, help="Cosine threshold."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Topic-change detection: precision/recall of the switches, per language and split."""
    from memlane.cli.language import print_topics_eval

    print_topics_eval(file, embedder, threshold, as_json)


@eval_app.command("response-cache")
def _eval_response_cache(
    file: Path | None = typer.Argument(
        None, help="JSONL of labelled question pairs (default: memlane's EN/DE set)."
    ),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder spec (the one the cache uses)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Response cache: when a paraphrase may take a cached answer; thresholds calibrated on
    the tune split, precision/recall per language and split (held aside)."""
    from memlane.cli.language import print_response_cache_eval

    print_response_cache_eval(file, embedder, as_json)


@eval_app.command("relevance")
def _eval_relevance(
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder to evaluate (minilm, hashing, none...)."),
    dataset: Path | None = typer.Option(None, "--set", help="Labelled set (default: the bundled dev set)."),
    refit: bool = typer.Option(False, "--fit", help="Also fit the logistic coefficients on the 'fit' queries."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Precision/recall of the calibrated relevance (min_score floors) on held-out queries."""
    import json

    from memlane.eval.relevance import collect, fit, load_set, report

    samples = collect(load_set(dataset), embedder)
    out: dict[str, Any] = {"embedder": embedder, "held_out": report(samples), "fit": report(samples, "fit")}
    if refit:
        out["fitted"] = repr(fit(samples, vectors=embedder not in ("none", "hashing")))
    if as_json:
        print(json.dumps(out, indent=2))
        return
    for split in ("held_out", "fit"):
        r = out[split]
        print(f"{split}: {r['queries']} queries, {r['hits']} hits, {r['relevant_hits']} relevant")
        for floor, f in r["floors"].items():
            print(f"  relevance >= {floor}: precision {f['precision']}, recall {f['recall']}, "
                  f"queries about nothing stored with a hit: "
                  f"{f['nothing_relevant_queries_with_a_hit']}/{f['nothing_relevant_queries']}")
    if refit:
        print("fitted:", out["fitted"])


def _quiet_flags(command: Any, args: list[str]) -> None:
    """Show no type for flags in --help: typer labels every bool ``<bool>``, but a flag takes no value.

    Only along the commands named in ``args`` (the ones whose help can show), so a start-up
    pays for three commands at most, not every one.
    """
    for param in command.get_params(typer.Context(command)):  # with the --help option itself
        if getattr(param, "is_flag", False):
            param.metavar = ""
    subs = getattr(command, "commands", {})
    for i, arg in enumerate(args):
        if arg in subs:
            _quiet_flags(subs[arg], args[i + 1:])
            return


@eval_app.command("crosslingual")
def _eval_crosslingual(
    file: Path | None = typer.Argument(None, help="JSONL of DE/EN pairs (default: memlane's 100 pairs)."),
    embedder: list[str] = typer.Option(
        ["minilm"], "--embedder", help="Embedder spec; repeat to compare (e.g. use-multilingual)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Cross-lingual recall: German query -> English memory and back, with and without expansion."""
    from memlane.cli.language import print_crosslingual_eval

    print_crosslingual_eval(file, tuple(embedder), as_json)


@eval_app.command("recall")
def _eval_recall(
    file: Path | None = typer.Argument(None, help="JSONL of same-language pairs (default: memlane's 164 EN/DE pairs)."),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder spec of the hybrid run (none: keyword only)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Same-language recall per language (EN, DE) and split: keyword index alone and hybrid."""
    from memlane.cli.language import print_recall_eval

    print_recall_eval(file, embedder, as_json)


@eval_app.command("promises")
def _eval_promises(
    file: Path | None = typer.Argument(None, help="JSONL of labelled assistant messages (default: memlane's 125 EN/DE)."),
    misses: bool = typer.Option(False, "--misses", help="List the cases judged wrongly."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Does an assistant's promise open a loop? Precision/recall per language and split."""
    from memlane.cli.language import print_promises_eval

    print_promises_eval(file, as_json, misses)


@eval_app.command("terms")
def _eval_terms(
    file: Path | None = typer.Argument(None, help="JSONL of labelled keyphrase and slot cases (default: memlane's 64 EN/DE)."),
    misses: bool = typer.Option(False, "--misses", help="List the cases judged wrongly."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Do word forms meet? Keyphrase recall/precision/duplicates and note-slot matching per language and split."""
    from memlane.cli.language import print_terms_eval

    print_terms_eval(file, as_json, misses)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning memlane errors into one line and an exit code."""
    command = typer.main.get_command(app)
    _quiet_flags(command, sys.argv[1:] if argv is None else argv)
    try:
        # Without standalone mode click returns a typer.Exit's code instead of raising it.
        returned = command(args=argv, prog_name="memlane", standalone_mode=False)
        if isinstance(returned, int) and returned:
            sys.exit(returned)
    except MemlaneError as exc:
        # soft_wrap: one line however long (a path in a deep directory), not cut at 80
        # columns when stderr is no terminal
        err_console.print(f"[red]error:[/red] {escape(cli_message(exc))}", highlight=False, soft_wrap=True)
        sys.exit(exit_code_for(exc))
    except (typer.Exit, SystemExit) as exc:
        code = exc.exit_code if isinstance(exc, typer.Exit) else exc.code
        sys.exit(code if isinstance(code, int) else 0)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except Exception as exc:
        # Usage errors (missing argument, bad option value) come from the click that
        # typer bundles; they know how to print themselves and their exit code (2).
        show = getattr(exc, "show", None)
        code = getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        raise


if __name__ == "__main__":
    main()
