"""A stand-in for a CLI agent that compacts: one request too long for the model's context (the
proxy refuses it), then a short "summarise" request, which is served; exits 0."""

import json
import os
import urllib.error
import urllib.request

URL = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"


def ask(text: str) -> int:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()
    req = urllib.request.Request(URL, body, {"Content-Type": "application/json",
                                             "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


print(ask("word " * 400), ask("summarise"))
