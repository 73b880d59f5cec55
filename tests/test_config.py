from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memlane.config import load_settings
from memlane.errors import ConfigError


def test_defaults_env_file_precedence(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("memory:\n  max_history_tokens: 2048\n  strategy: summary\n")
    s = load_settings(cfg, env={"MEMLANE_STRATEGY": "simple"})
    assert s.max_history_tokens == 2048 and s.strategy == "simple"
    s2 = load_settings(cfg, env={}, strategy="hybrid")
    assert s2.strategy == "hybrid"
    top_level = tmp_path / "t.yaml"
    top_level.write_text("auto_prune_days: 7\n")
    assert load_settings(top_level, env={}).auto_prune_days == 7


def test_matrix_user_id_is_the_anchor_fallback() -> None:
    assert load_settings(env={"MATRIX_USER_ID": "@jan:hs"}).anchor_id == "@jan:hs"
    assert load_settings(env={"MATRIX_USER_ID": "@jan:hs", "MEMLANE_ANCHOR_ID": "me"}).anchor_id == "me"


def test_bad_settings_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="strategy"):
        load_settings(env={"MEMLANE_STRATEGY": "magic"})
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.yaml", env={})
    broken = tmp_path / "b.yaml"
    broken.write_text("memory: [1, 2")
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(broken, env={})
    with pytest.raises(ConfigError, match="colour: Extra inputs"):
        load_settings(env={}, colour="red")


def test_strings_a_setting_takes_as_they_are_skip_the_checking_model() -> None:
    # pydantic's import and model cost a short-lived process ~50 ms (a CLI call, a restarted
    # worker): Memory(path, durability="normal") must not pay them for a plain choice.
    script = (
        "import sys\n"
        "from memlane.config import load_settings\n"
        "s = load_settings(env={}, durability='normal', embedder='hashing', strategy='simple', token_model=None)\n"
        "assert (s.durability, s.embedder, s.strategy) == ('normal', 'hashing', 'simple'), s\n"
        "assert 'pydantic' not in sys.modules, 'pydantic imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_values_not_taken_as_they_are_are_still_checked() -> None:
    with pytest.raises(ConfigError, match="durability"):
        load_settings(env={}, durability="fast")
    with pytest.raises(ConfigError, match="durability"):
        load_settings(env={}, durability=1)
    with pytest.raises(ConfigError, match="redis_url"):
        load_settings(env={}, redis_url="http://cache:6379")
    assert load_settings(env={}, max_history_tokens="2048").max_history_tokens == 2048
    assert load_settings(env={}, allowed_hosts="A.example, b.example").allowed_hosts == ["a.example", "b.example"]
