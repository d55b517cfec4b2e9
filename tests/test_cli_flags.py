"""One meaning per short flag across every `harnessrl` command (e.g. -c is --config wherever it
appears, never --concurrency elsewhere)."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from harnessrl.app.main import app


def _options(cmd: Any, path: str) -> list[tuple[str, str, str]]:
    """(command path, short flag, long flag) of every option of `cmd` (a click command, as typer
    builds it) and its subcommands."""
    if hasattr(cmd, "commands"):
        return [o for name, sub in cmd.commands.items() for o in _options(sub, f"{path} {name}")]
    out = []
    for p in cmd.params:
        if p.param_type_name == "option":
            shorts = [o for o in p.opts if not o.startswith("--")]
            longs = [o for o in p.opts if o.startswith("--")]
            out += [(path, s, longs[0] if longs else s) for s in shorts]
    return out


def test_each_short_flag_names_one_option_everywhere():
    seen: dict[str, dict[str, str]] = {}
    for path, short, long in _options(typer.main.get_command(app), "harnessrl"):
        seen.setdefault(short, {})[path] = long
    clashes = {s: uses for s, uses in seen.items() if len(set(uses.values())) > 1}
    assert not clashes, clashes
    assert seen["-c"] and set(seen["-c"].values()) == {"--config"}  # rollout, eval and train alike
    assert {"harnessrl rollout", "harnessrl eval", "harnessrl train"} <= set(seen["-c"])
    assert set(seen["-n"].values()) == {"--samples"}  # rollouts per (task, harness) group, rollout and eval alike
    assert {"harnessrl rollout", "harnessrl eval"} <= set(seen["-n"])


def _schema_field(schema: dict[str, Any], key: str) -> dict[str, Any]:
    """The JSON schema of a dotted RunConfig key, read through its section's $ref."""
    section, name = key.split(".")
    ref = schema["properties"][section].get("$ref") or schema["properties"][section]["allOf"][0]["$ref"]
    field = schema["$defs"][ref.rsplit("/", 1)[-1]]["properties"][name]
    return next((a for a in field.get("anyOf", []) if a.get("type") in ("integer", "number")), field)


SERVING_COMMANDS = ("serve", "rollout", "eval")


# the serving flags each command has (app/flags.py FLAG_KEYS names them all)
SERVING_FLAGS = ("model", "engine", "tool_format", "max_tokens", "default_temperature", "default_top_p",
                 "temperature_mode", "top_p_mode", "max_tokens_mode")
COMMAND_FLAGS = {"serve": {*SERVING_FLAGS, "max_model_len"},
                 "rollout": {*SERVING_FLAGS, "sandbox", "concurrency", "max_turns", "timeout"}}
COMMAND_FLAGS["eval"] = COMMAND_FLAGS["rollout"]


def test_serving_flags_take_name_default_and_bound_from_the_run_config():
    """Each serving flag of serve / rollout / eval (generated from FLAG_KEYS): named after its option,
    None unless given (the config's value applies), --help showing the RunConfig key, its default and
    the bound the RunConfig schema declares; the bound itself is enforced once, by the config."""
    from harnessrl.app.flags import FLAG_KEYS
    from harnessrl.config import RunConfig

    schema, defaults = RunConfig.model_json_schema(), RunConfig().model_dump()
    signs = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    root = typer.main.get_command(app)
    checked, metavars = {}, {}
    for command in SERVING_COMMANDS:
        params = {p.name: p for p in root.commands[command].params}
        assert {name for name in FLAG_KEYS if name in params} == COMMAND_FLAGS[command], command
        for name in COMMAND_FLAGS[command]:
            key, p = FLAG_KEYS[name], params[name]
            section, field = key.split(".")
            field_schema = _schema_field(schema, key)
            bound = ", ".join(f"{signs[k]} {field_schema[k]:g}" for k in signs if k in field_schema)
            assert p.opts[0] == "--" + name.replace("_", "-"), (command, name)
            assert p.default is None, (command, name)
            assert p.show_default == f"{key}: {defaults[section][field]}", (command, name, p.show_default)
            # the bound beside the type, in typer's own range notation (one style for every flag)
            assert (p.metavar or "").endswith("]") == bool(bound) and "Bound" not in p.help, (command, name)
            allowed = [v for part in [field_schema, *field_schema.get("anyOf", [])] for v in part.get("enum", [])]
            if (command, name) == ("serve", "engine"):  # serve runs its engine in-process: its own list
                allowed = [v for v in allowed if not v.endswith("_server")]
            assert all(str(v) in p.help for v in allowed), (command, name, allowed, p.help)  # a Literal's values
            checked[(command, name)] = (bound, p.show_default)
            metavars[(command, name)] = p.metavar
    assert checked[("rollout", "max_turns")][0] == checked[("eval", "max_turns")][0] == ">= 1"
    assert checked[("serve", "default_temperature")] == checked[("rollout", "default_temperature")]
    assert checked[("serve", "default_temperature")][0] == ">= 0, <= 2"
    assert checked[("eval", "default_top_p")][0] == "> 0, <= 1" and checked[("serve", "max_tokens")][0] == ">= 1"
    assert checked[("serve", "max_model_len")][0] == ">= 16"
    assert metavars[("serve", "default_temperature")] == "<float> [0<=x<=2]"
    assert metavars[("eval", "default_top_p")] == "<float> [0<x<=1]" and metavars[("rollout", "timeout")] == "<float> [x>0]"
    assert metavars[("serve", "max_tokens")] == "<int> [x>=1]" and metavars[("eval", "model")] is None
    serve_engine = {p.name: p for p in root.commands["serve"].params}["engine"].help
    assert "auto | hf | vllm | scripted" in serve_engine and "vllm_server" not in serve_engine  # one list: its own
    eval_engine = {p.name: p for p in root.commands["eval"].params}["engine"].help
    assert eval_engine.count("vllm_server") == 1
    for command in SERVING_COMMANDS:  # the words, not a literal "default": the config's mode applies
        assert checked[(command, "top_p_mode")] == ("", "serve.top_p_mode: default"), command
        assert checked[(command, "engine")] == ("", "engine.type: auto"), command


@pytest.mark.parametrize("command", SERVING_COMMANDS)
def test_a_serving_flag_out_of_its_bound_is_refused_naming_the_flag(command, tmp_path):
    result = CliRunner().invoke(app, [command, "--engine", "scripted", "--default-temperature", "2.5",
                                      "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 2 and "--default-temperature" in result.output
    assert "less than or equal to 2" in " ".join(result.output.replace("│", " ").split())
    assert not (tmp_path / "run").exists()  # refused before anything was served or stored


def test_sft_flags_default_to_the_sft_options():
    """`harnessrl sft`'s defaults are SFTOptions' own (written once, in sft/fine_tune.py)."""
    import dataclasses

    from harnessrl.sft.fine_tune import SFTOptions

    params = {p.name: p for p in typer.main.get_command(app).commands["sft"].params}
    fields = {f.name: f.default for f in dataclasses.fields(SFTOptions)}
    shared = set(params) & set(fields)
    assert shared >= {"mode", "epochs", "lr", "batch_trees", "token_budget", "min_reward", "seed"}
    assert {k: params[k].default for k in shared} == {k: fields[k] for k in shared}
