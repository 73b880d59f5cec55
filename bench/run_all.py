"""Run every `memlane bench` and `memlane eval` whose figures README.md, docs/ and bench/README.md cite.

(The int8-activation figures come from `python -m memlane.cli.minilm_w8a8 --compare`.)

    .venv/bin/python bench/run_all.py            # full sizes (takes a while)
    .venv/bin/python bench/run_all.py --quick    # small sizes, to check the pipeline

Each step is a `memlane` command anyone can rerun by hand; its JSON goes to
bench/out/<name>.json and a one-line summary is printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from memlane.eval.locomo_data import locomo_files

ROOT = Path(__file__).resolve().parents[1]
MEMLANE = [sys.executable, "-m", "memlane.cli.main"]


def steps(quick: bool) -> list[tuple[str, list[str]]]:
    # $MEMLANE_LOCOMO_DIR, else ../shared/data/locomo beside the checkout: what `memlane eval` looks in
    found = locomo_files()
    files = [str(p) for p in (found[:1] if quick else found)]
    if not files:
        sys.exit("no LoCoMo files: set MEMLANE_LOCOMO_DIR to the directory holding them")
    return [
        ("write", ["bench", "write", "--json", *(["--adds", "200", "--history", "5000"] if quick else [])]),
        ("cold", ["bench", "cold", "--json", *(["--runs", "2"] if quick else [])]),
        ("eval_locomo", ["eval", "locomo", *files, "--json"]),
        ("eval_summaries", ["eval", "summaries", *files, "--json"]),
        ("search", ["bench", "search", "--json", *(["--messages", "5000"] if quick else [])]),
        ("store", ["bench", "store", "--store", "embedded", "--json",
                   *(["--messages", "5000"] if quick else [])]),
        ("serve", ["bench", "serve", "--json", "--duration", "10" if quick else "60"]),
        ("events", ["bench", "events", "--json", *(["--events", "20", "--polls", "100"] if quick else [])]),
        ("caches", ["bench", "caches", "--json", "--postgres",
                    *(["--model-delay", "0", "--reads", "100"] if quick else ["--model-delay", "2.0"])]),
        ("erase", ["bench", "erase", "--json", *(["--messages", "5000", "--erases", "5"] if quick else [])]),
        ("eval_references", ["eval", "references", "--json"]),
        ("eval_topics", ["eval", "topics", "--json"]),
        ("eval_relevance", ["eval", "relevance", "--json"]),
        ("eval_crosslingual", ["eval", "crosslingual", "--json"]),
        ("eval_recall", ["eval", "recall", "--json"]),
        ("eval_promises", ["eval", "promises", "--json"]),
        ("eval_response_cache", ["eval", "response-cache", "--json"]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--only", nargs="*", help="run only these steps")
    args = parser.parse_args()
    out_dir = ROOT / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name, argv in steps(args.quick):
        if args.only and name not in args.only:
            continue
        started = time.time()
        print(f"$ memlane {' '.join(argv)}", flush=True)
        proc = subprocess.run([*MEMLANE, *argv], capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            failed += 1
            print(f"  FAILED ({proc.returncode}): {proc.stderr.strip()[-500:]}")
            continue
        (out_dir / f"{name}.json").write_text(proc.stdout)
        try:
            summary = json.dumps(json.loads(proc.stdout))[:300]
        except ValueError:
            summary = proc.stdout.strip()[:300]
        print(f"  {time.time() - started:.0f}s  {summary}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
