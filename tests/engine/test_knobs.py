"""One name, one default, one check per sampling knob (engine/knobs.py): the config, the proxy's
ServingPolicy and the engine's SamplingParams take their defaults from it, and every bound check
of a value asked of the engine is `knob_error` (grep tests over src/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harnessrl.config import RunConfig
from harnessrl.engine.base import SamplingParams
from harnessrl.engine.knobs import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, DEFAULT_TOP_P, Sent, knob_error, validate_params
from harnessrl.proxy.serving import ServingPolicy

SRC = Path(__file__).resolve().parents[2] / "src" / "harnessrl"


def test_every_layer_takes_the_one_default():
    cfg, policy, params = RunConfig().serve, ServingPolicy(), SamplingParams()
    assert cfg.default_temperature == policy.default_temperature == params.temperature == DEFAULT_TEMPERATURE
    assert cfg.default_top_p == policy.default_top_p == params.top_p == DEFAULT_TOP_P
    assert cfg.max_tokens == policy.max_tokens == params.max_tokens == DEFAULT_MAX_TOKENS


@pytest.mark.parametrize("values, knob", [((-0.1, None, None), "temperature"), ((None, 0.0, None), "top_p"),
                                          ((None, 1.5, None), "top_p"), ((None, None, 0), "max_tokens")])
def test_one_check_for_a_request_and_an_engine_call(values, knob):
    message, named = knob_error(Sent(*values))
    assert named == knob and knob in message
    with pytest.raises(ValueError, match=knob):
        validate_params(SamplingParams(*(v if v is not None else d for v, d in
                                         zip(values, (DEFAULT_TEMPERATURE, DEFAULT_TOP_P, DEFAULT_MAX_TOKENS)))))
    assert knob_error(Sent(0.0, 1.0, 1)) is None  # greedy is a value a request may ask


def test_no_other_module_writes_a_knob_default_or_bound():
    own = {"engine/knobs.py"}
    found = set()
    for p in SRC.rglob("*.py"):
        rel = p.relative_to(SRC).as_posix()
        text = p.read_text()
        if re.search(r"(temperature|top_p)[a-z_]*\s*(:\s*float)?\s*=\s*1\.0\b", text) or \
                re.search(r"\b(temperature|top_p)\s*(<|<=)\s*0\b|top_p\s*<=\s*1\b", text) or \
                re.search(r"Annotated\[(float|int), Field\(g[te]=", text):
            found.add(rel)
    assert found - {"engine/sampling.py"} <= own, found  # sampling.py: T = 0 is greedy (not a check)


def test_the_knobs_travel_as_one_object():
    """A request (ChatRequest), an engine call (SamplingParams) or a harness option (`Sent`) is
    checked, resolved and bounded whole: no caller splits it into temperature, top_p, max_tokens
    arguments (knob_error, ServingPolicy.resolve, fit_max_tokens)."""
    from harnessrl.proxy.canonical import ChatRequest

    req = ChatRequest(messages=[], tools=[], model="m", temperature=-1.0)
    assert knob_error(req) == ("temperature must be >= 0, got -1.0", "temperature")
    used = ServingPolicy().resolve(ChatRequest(messages=[], tools=[], model="m", max_tokens=7))
    assert (used.temperature, used.top_p, used.max_tokens) == (DEFAULT_TEMPERATURE, DEFAULT_TOP_P, 7)
    split = re.compile(r"\.temperature,\s*\w+\.top_p,\s*\w+\.max_tokens\)|\b(knob_error|resolve)\((None|\w+\.temperature)\b"
                       r"|fit_max_tokens\([^,]+,\s*\w+\.max_tokens\b")
    found = sorted(p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if split.search(p.read_text()))
    assert found == []
