"""``memlane encrypt`` and ``memlane decrypt``: convert a SQLite store to or from SQLCipher."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from memlane.cli.common import console, state
from memlane.cli.progress import progress_bar


def _convert(ctx: typer.Context, *, encrypt: bool, yes: bool, as_json: bool) -> None:
    from memlane.errors import ConfigError, InvalidInputError
    from memlane.sealing import Sealer
    from memlane.state.checkpoint import checkpoint_dir, convert_checkpoints
    from memlane.store import local_file
    from memlane.store.sqlite_crypt import convert

    st = state(ctx)
    verb = "encrypt" if encrypt else "decrypt"
    found = local_file(st.url(create=False))
    if found is None:
        raise InvalidInputError(f"{verb} works on a SQLite file, not {st.url()}")
    target = str(found)
    key = st.key()
    if not key:
        raise ConfigError(f"{verb} needs the key: set MEMLANE_KEY, or name the variable with --key-env NAME")
    if not yes:
        typer.confirm(f"{verb.capitalize()} {target}? Stop every process using it first.", abort=True)
    with progress_bar() as update:
        report = convert(target, key, encrypt=encrypt, progress=update)
    # Checkpoints beside the store hold message text: sealed with the same key, or opened.
    directory = checkpoint_dir(Path(target), st.settings().checkpoint_dir)
    if directory.is_dir():
        convert_checkpoints(directory, Sealer(key), seal=encrypt)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
        return
    if report.resumed == "already":
        console.print(f"{report.path} is already {verb}ed ({report.tables} tables, {report.rows:,} rows); "
                      "nothing to do", highlight=False)
        return
    note = {"restarted": "; an interrupted run's partial copy was scrubbed and the copy redone",
            "finished": "; an interrupted run's swap was finished and the old file scrubbed"}.get(report.resumed, "")
    console.print(f"{verb}ed {report.path}: {report.tables} tables, {report.rows:,} rows verified "
                  f"({report.bytes:,} bytes, {report.seconds:.1f}s){note}", highlight=False)


def encrypt_cmd(
    ctx: typer.Context,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Encrypt a SQLite store in place with SQLCipher (key from MEMLANE_KEY or --key-env).

    A verified copy replaces the file in one rename, then the old file is zeroed. Killed
    at any point, nothing is lost: running the command again discards a partial copy or
    finishes an interrupted swap. Stop the processes using the store first.
    """
    _convert(ctx, encrypt=True, yes=yes, as_json=as_json)


def decrypt_cmd(
    ctx: typer.Context,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Decrypt an encrypted SQLite store in place (same verified copy; rerun after an interruption)."""
    _convert(ctx, encrypt=False, yes=yes, as_json=as_json)


def register(app: typer.Typer) -> None:
    app.command("encrypt")(encrypt_cmd)
    app.command("decrypt")(decrypt_cmd)
