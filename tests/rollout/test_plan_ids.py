"""Rollout ids name a `command:` harness by its program and a hash, never by its whole template."""

from __future__ import annotations

from harnessrl.rollout.plan import harness_tag, plan_cross
from harnessrl.tasks import load_tasks

OPENCODE = ("command:OPENCODE_CONFIG_CONTENT='{\"provider\": {\"harnessrl\": {\"options\": {\"baseURL\": "
            "\"$OPENAI_BASE_URL\"}}}}' /opt/agents/opencode/bin/opencode run --model harnessrl/policy {task}")


def test_command_ids_are_short_and_free_of_the_template():
    task = load_tasks("builtin:write_word:test")[0]
    plan = plan_cross([task], [OPENCODE, "codex:small"], 2, step=0, attempt=4, split="rollout")
    ids = [job.rollout_id for p in plan for job in p.jobs()]
    assert ids[0].startswith("rollout-s0-a4-cmd-opencode-") and ids[0].endswith("-0:0")
    assert all(len(i) < 60 and "{" not in i and "'" not in i and " " not in i for i in ids)
    assert ids[2] == "rollout-s0-a4-codex:small-0:0"  # named harnesses keep their spec


def test_command_tags_tell_templates_apart_and_are_stable():
    a, b = harness_tag("command:aider --yes {task}"), harness_tag("command:aider --no-git {task}")
    assert a != b and a.startswith("cmd-aider-") and b.startswith("cmd-aider-")
    assert harness_tag("command:aider --yes {task}") == a
    assert harness_tag("command:env FOO=1 /usr/bin/qwen -p {task}").startswith("cmd-qwen-")
    assert harness_tag("command:'unbalanced").startswith("cmd-")
