"""--help follows the conventions of typer/click tools (app/cli_style.py): no placeholder on a switch,
positionals as RUN_DIR, one value type for a repeatable flag, one bound style, long flag names, one
engine list per flag, all four protocols named; `harness list` says "no", not "no not installed"."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from harnessrl.app.main import app

COMMANDS = [["serve"], ["calls"], ["rollout"], ["eval"], ["train"], ["config", "validate"], ["tree", "show"],
            ["harness", "check"], ["harness", "list"], ["tasks", "list"], []]


def _help(args: list[str]) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "harnessrl")
def test_help_shows_no_typer_placeholders(args):
    text = _help(args)
    assert "<bool>" not in text and "<list[" not in text and " range>" not in text, text
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "{" not in usage, usage  # a positional shows as RUN_DIR, not {run_dir}
    assert "Bound:" not in text, text


def test_positionals_are_shown_in_capitals():
    assert re.search(r"Usage: .*calls \[OPTIONS\] RUN_DIR\s*$", _help(["calls"]), re.M)
    assert re.search(r"Usage: .*check \[OPTIONS\] SPEC\s*$", _help(["harness", "check"]), re.M)
    assert re.search(r"Usage: .*train \[OPTIONS\] \[OVERRIDES\]\.\.\.\s*$", _help(["train"]), re.M)


def test_switches_take_no_value_and_bounds_show_one_way():
    text = _help(["eval"])
    assert re.search(r"--json\s{2,}Print one JSON", text), text  # nothing between the switch and its help
    assert "<int> [x>=1]" in text and "<float> [0<=x<=2]" in text  # typer's bound (--samples) and a config one


def test_eval_names_pass_at_k_with_a_long_flag_and_keeps_k_hidden():
    text = _help(["eval"])
    assert "--pass-at-k" in text and not re.search(r"--k\b", text)
    params = {p.name: p for p in typer.main.get_command(app).commands["eval"].params}
    assert params["k_alias"].opts == ["--k"] and params["k_alias"].hidden


def test_serve_lists_its_engines_once_and_all_four_protocols():
    text = " ".join(_help(["serve"]).replace("│", " ").split())
    assert text.count("vllm_server") == 0 and text.count("auto | hf | vllm | scripted") == 1
    for protocol in ("OpenAI Chat Completions", "OpenAI Responses", "Anthropic Messages", "Gemini"):
        assert protocol in text


def test_serve_banner_names_the_weights_and_four_protocols(tmp_path):
    import io

    from rich.console import Console

    from harnessrl.app.serve import _print_urls

    class Server:
        admin_token = "t"

        def base_urls(self):
            return {"openai": "http://h/v1", "responses": "http://h/v1", "anthropic": "http://h", "gemini": "http://h"}

    weights = tmp_path / "checkpoints" / "step_000008" / "policy"
    out = io.StringIO()
    _print_urls(Console(file=out, width=300), Server(), tmp_path, weights)
    text = out.getvalue()
    assert str(weights) in text
    for protocol in ("OpenAI Chat Completions", "OpenAI Responses", "Anthropic Messages", "Gemini"):
        assert protocol in text


def test_harness_list_says_no_without_repeating_it():
    from harnessrl.app.harness import installed_mark

    assert installed_mark(False, "not installed") == "[red]no[/]"
    assert installed_mark(False, "found 1.2, want 1.3") == "[red]no[/] (found 1.2, want 1.3)"
    assert installed_mark(True, "") == "[green]yes[/]"
