"""Output of the language evaluations (``memlane eval references|topics|crosslingual|recall|promises|terms``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from memlane.cli.common import console

_SHORT = {"clarification_precision": "ask P", "clarification_recall": "ask R", "false_positive_rate": "FP rate"}


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def print_references_eval(file: Path | None, split: str, as_json: bool, misses: bool) -> None:
    from memlane.eval.references import run_references_eval, table_rows

    result = run_references_eval(file, split)
    if as_json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return
    cols = ["cases", "accuracy", "clarification_precision", "clarification_recall", "false_positive_rate"]
    table = Table(title=f"Reference resolution ({split})")
    table.add_column("", no_wrap=True, min_width=30)
    for c in cols:
        table.add_column(_SHORT.get(c, c), justify="right")
    for name, fig in table_rows(result):
        table.add_row(name, *(_fmt(fig[c]) for c in cols))
    console.print(table, width=130)
    if misses:
        for m in result["misses"]:
            console.print(f"{m['id']} ({m['split']}) {m['query']!r}: expected {m['expected']} "
                          f"{m['want']}, did {m['did']}: {m['got']!r}", highlight=False, markup=False, width=400)


def print_topics_eval(file: Path | None, embedder: str, threshold: float, as_json: bool) -> None:
    from memlane.eval.topics import run_topics_eval

    result = run_topics_eval(file, embedder=embedder, threshold=threshold)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    table = Table(title=f"Topic changes (embedder {embedder}, threshold {threshold})")
    for col in ("detector", "group", "switch", "cont.", "P", "R", "F1"):
        table.add_column(col, no_wrap=True, justify="left" if col in ("detector", "group") else "right")
    for method, groups in result["figures"].items():
        for name, fig in groups.items():
            table.add_row(method, name, *(_fmt(fig[c]) for c in ("switches", "continuations", "precision", "recall", "f1")))
    console.print(table)


def _pair_table(title: str, runs: dict[str, Any]) -> None:
    from memlane.eval.pairs import KS

    table = Table(title=title)
    for col in ("run", "group", "pairs", *(f"R@{k}" for k in KS), "p50 ms"):
        table.add_column(col, no_wrap=True, justify="left" if col in ("run", "group") else "right")
    for name, run in runs.items():
        for group, fig in run["figures"].items():
            table.add_row(name, group, str(fig["pairs"]), *(_fmt(fig[f"recall@{k}"]) for k in KS),
                          _fmt(run["search_ms_p50"]))
    # wide enough for every column whatever the terminal (a slow run's "150.03 ms" would
    # otherwise squeeze the run names into "minilm + expan…"); Console.print clamps its
    # width to the console's, so a console at least that wide prints it
    from rich.console import Console

    Console(width=max(console.width, 130), highlight=False).print(table)


def print_crosslingual_eval(file: Path | None, embedders: tuple[str, ...], as_json: bool) -> None:
    from memlane.eval.crosslingual import run_crosslingual_eval

    result = run_crosslingual_eval(file, embedders=embedders)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    _pair_table(f"Cross-lingual recall, {result['pairs']} DE/EN pairs", result["runs"])


def print_recall_eval(file: Path | None, embedder: str, as_json: bool) -> None:
    from memlane.eval.samelang import run_recall_eval

    result = run_recall_eval(file, embedder=embedder)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    _pair_table(f"Same-language recall, {result['pairs']} pairs (embedder {embedder})", result["runs"])


def print_promises_eval(file: Path | None, as_json: bool, misses: bool) -> None:
    from memlane.eval.promises import run_promises_eval

    result = run_promises_eval(file)
    if as_json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return
    _print_groups("Promises that open a loop (assistant messages)", result["figures"],
                  ("cases", "precision", "recall", "accuracy"))
    if misses:
        for m in result["misses"]:
            console.print(f"{m['id']} ({m['split']}) expected promise={m['expected']}: {m['text']!r}",
                          highlight=False, markup=False, width=400)


def _print_groups(title: str, figures: dict[str, dict[str, Any]], cols: tuple[str, ...]) -> None:
    """One row of ``cols`` per group of an evaluation's figures."""
    table = Table(title=title)
    for col in ("group", *cols):
        table.add_column(col, no_wrap=True, justify="left" if col == "group" else "right")
    for group, fig in figures.items():
        table.add_row(group, *(_fmt(fig[c]) for c in cols))
    console.print(table)


def print_terms_eval(file: Path | None, as_json: bool, misses: bool) -> None:
    from memlane.eval.terms import TOP_K, run_terms_eval

    result = run_terms_eval(None if file is None else str(file))
    if as_json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return
    _print_groups(f"Word forms: keyphrases (top {TOP_K}) and note slots", result["figures"],
                  ("cases", "precision", "recall", "duplicates"))
    if misses:
        for m in result["misses"]:
            console.print(f"{m['id']} ({m['split']}, {m['task']}): {m['got']}", highlight=False, markup=False, width=400)


def print_response_cache_eval(file: Path | None, embedder: str, as_json: bool) -> None:
    from memlane.eval.response_cache import run_response_cache_eval

    result = run_response_cache_eval(file, embedder=embedder)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    shipped, calibrated = result["shipped"], result["calibrated"]
    console.print(f"thresholds shipped {shipped}, calibrated on tune {calibrated}", highlight=False)
    table = Table(title=f"Response cache semantic match (embedder {embedder}, shipped thresholds)")
    for col in ("group", "pairs", "paraphrases", "matched", "wrong", "P", "R"):
        table.add_column(col, no_wrap=True, justify="left" if col == "group" else "right")
    for name, fig in result["figures"].items():
        table.add_row(name, *(_fmt(fig[c]) for c in ("pairs", "paraphrases", "matched", "wrong", "precision", "recall")))
    console.print(table)
