"""The proxy's OpenAPI 3.1 document, served at `GET /openapi.json`: every route a harness uses,
under the ad-hoc base `/` and a rollout key's base `/r/{key}` (the `servers`), with each
protocol's request schema (from its pydantic request model), its success bodies and its typed
error answers in its own shape and statuses (errors.py): Anthropic `{"type": "error", "error":
{"type", "message"}}` with 529 for overload, OpenAI `{"error": {"message", "type", "param",
"code"}}` and Google `{"error": {"code", "message", "status"}}` with 503. A 5xx other than those two is never documented: it would be a proxy bug.

The request schemas are as lenient as the models (unknown fields are allowed); what a text-only
policy cannot honour is refused with a documented 400, not by the schema (wire.py).
"""

from __future__ import annotations

from typing import Any

from harnessrl.proxy.protocols import ANTHROPIC, GEMINI, OPENAI_CHAT, OPENAI_RESPONSES
from harnessrl.proxy.wire import WireProtocol

_ANTHROPIC_ERROR_TYPES = sorted({"invalid_request_error", "authentication_error", "permission_error", "not_found_error",
                                 "timeout_error", "request_too_large", "rate_limit_error", "overloaded_error",
                                 "api_error"})
ANTHROPIC_ERROR = {
    "type": "object", "required": ["type", "error"], "additionalProperties": False,
    "properties": {"type": {"const": "error"}, "error": {
        "type": "object", "required": ["type", "message"], "additionalProperties": False,
        "properties": {"type": {"enum": _ANTHROPIC_ERROR_TYPES}, "message": {"type": "string"}}}}}
OPENAI_ERROR = {
    "type": "object", "required": ["error"], "additionalProperties": False,
    "properties": {"error": {
        "type": "object", "required": ["message", "type", "param", "code"], "additionalProperties": False,
        "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                       "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}}
GOOGLE_ERROR = {
    "type": "object", "required": ["error"], "additionalProperties": False,
    "properties": {"error": {
        "type": "object", "required": ["code", "message", "status"], "additionalProperties": False,
        "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "status": {"type": "string"}}}}}
_ANY_ERROR = {"anyOf": [{"$ref": "#/components/schemas/OpenAIError"}, {"$ref": "#/components/schemas/AnthropicError"}]}
_ERROR_SCHEMA = {ANTHROPIC.name: "AnthropicError", GEMINI.name: "GoogleError"}

# what each route can answer besides 200 (errors.py: kind -> status)
_CALL_ERRORS = {"400": "invalid request, or the prompt is too long", "401": "unknown or closed rollout key",
                "408": "the body did not arrive in time", "413": "body over the limit, or the rollout's store quota spent",
                "429": "too many calls (or large requests) in flight on this key (Retry-After)"}
_OK_BODY = {  # the parts a client relies on; the full bodies follow the public APIs
    ANTHROPIC.name: {"type": "object", "required": ["id", "type", "role", "content", "stop_reason", "usage"],
                     "properties": {"type": {"const": "message"}, "content": {"type": "array"}}},
    OPENAI_CHAT.name: {"type": "object", "required": ["id", "object", "choices", "usage"],
                       "properties": {"object": {"const": "chat.completion"}, "choices": {"type": "array"}}},
    OPENAI_RESPONSES.name: {"type": "object", "required": ["id", "object", "output", "status"],
                            "properties": {"object": {"const": "response"}, "output": {"type": "array"}}},
    GEMINI.name: {"type": "object", "required": ["candidates", "usageMetadata"],
                  "properties": {"candidates": {"type": "array", "minItems": 1, "maxItems": 1}}},
}
_MODEL_PARAM = {"name": "model", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[^/:]+$"}}

# one server-sent event of a streamed answer (or of its in-stream error), as schemathesis splits them
_SSE_EVENT = {"type": "object", "required": ["data"],
              "properties": {"event": {"type": "string"}, "data": {"type": "string"}}}


def _error_ref(wire: WireProtocol) -> dict[str, str]:
    return {"$ref": "#/components/schemas/" + _ERROR_SCHEMA.get(wire.name, "OpenAIError")}


def _errors(wire: WireProtocol, statuses: dict[str, str]) -> dict[str, Any]:
    return {code: {"description": why, "content": {"application/json": {"schema": _error_ref(wire)}}}
            for code, why in statuses.items()}


def _request_schema(wire: WireProtocol, components: dict[str, Any]) -> dict[str, Any]:
    """The protocol's request model as a JSON schema; its nested models go to components under a
    per-protocol prefix (two protocols both have a `_Message`)."""
    prefix = wire.name.replace(".", "_") + "_"
    schema = wire.request_model.model_json_schema(ref_template=f"#/components/schemas/{prefix}{{model}}")
    for name, sub in schema.pop("$defs", {}).items():
        components[prefix + name] = sub
    components[prefix + "Request"] = schema
    return {"$ref": f"#/components/schemas/{prefix}Request"}


def _call_operation(wire: WireProtocol, components: dict[str, Any], route: str) -> dict[str, Any]:
    overload = "529" if wire is ANTHROPIC else "503"
    method = route.rsplit(":", 1)[1] if "{model}" in route else ""
    params: dict[str, Any] = {"parameters": [_MODEL_PARAM]} if method else {}
    if method == "streamGenerateContent":
        params["parameters"] = [_MODEL_PARAM, {"name": "alt", "in": "query", "required": True,
                                               "schema": {"const": "sse"}}]
    return {"post": {
        "operationId": wire.name.replace(".", "_") + (f"_{method}" if method else ""), **params,
        "requestBody": {"required": True, "content": {"application/json": {"schema": _request_schema(wire, components)}}},
        "responses": {
            "200": {"description": "the model's answer (a JSON body, or the SSE events of a streamed call)",
                    "content": {"application/json": {"schema": _OK_BODY[wire.name]},
                                "text/event-stream": {"schema": _SSE_EVENT}}},
            **_errors(wire, {**_CALL_ERRORS, overload: "the engine or the proxy is overloaded (Retry-After)"}),
        }}}


def openapi_schema(served_model: str) -> dict[str, Any]:
    components: dict[str, Any] = {"AnthropicError": ANTHROPIC_ERROR, "OpenAIError": OPENAI_ERROR,
                                  "GoogleError": GOOGLE_ERROR}
    paths: dict[str, Any] = {route: _call_operation(wire, components, route)
                             for wire in (ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, GEMINI) for route in wire.routes}
    paths[GEMINI.count_tokens_route] = {"post": {
        "operationId": "gemini_count_tokens", "parameters": [_MODEL_PARAM],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "$ref": "#/components/schemas/gemini_generate_content_Request"}}}},
        "responses": {"200": {"description": "the prompt length as this rollout would render it",
                              "content": {"application/json": {"schema": {
                                  "type": "object", "required": ["totalTokens"],
                                  "properties": {"totalTokens": {"type": "integer", "minimum": 0}}}}}},
                      **_errors(GEMINI, {**_CALL_ERRORS, "503": "too many large requests on the proxy (Retry-After)"})}}}
    paths[ANTHROPIC.count_tokens_route] = {"post": {
        "operationId": "anthropic_count_tokens",
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "$ref": "#/components/schemas/anthropic_messages_Request"}}}},
        "responses": {"200": {"description": "the prompt length as this rollout would render it",
                              "content": {"application/json": {"schema": {
                                  "type": "object", "required": ["input_tokens"],
                                  "properties": {"input_tokens": {"type": "integer", "minimum": 0}}}}}},
                      **_errors(ANTHROPIC, {**_CALL_ERRORS,
                                            "529": "too many large requests on the proxy (Retry-After)"})}}}
    model_entry = {"type": "object", "required": ["id", "object", "type"],
                   "properties": {"id": {"const": served_model}}}
    any_error = {"content": {"application/json": {"schema": _ANY_ERROR}}}
    paths["/v1/models"] = {"get": {
        "operationId": "list_models",
        "responses": {"200": {"description": "the one served model", "content": {"application/json": {"schema": {
            "type": "object", "required": ["object", "data"],
            "properties": {"data": {"type": "array", "items": model_entry, "minItems": 1, "maxItems": 1}}}}}},
            "401": {"description": "unknown or closed rollout key", **any_error}}}}
    paths["/v1/models/{model}"] = {"get": {
        "operationId": "get_model",
        "parameters": [{"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "the served model", "content": {"application/json": {
            "schema": model_entry}}},
            "401": {"description": "unknown or closed rollout key", **any_error},
            "404": {"description": "any other model id", **any_error}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "harnessrl proxy", "version": "1",
                 "description": "Anthropic Messages, OpenAI Chat Completions, OpenAI Responses and the Gemini API "
                                "over one policy; "
                                "every call is recorded in the run store (docs/proxy.md)."},
        "servers": [{"url": "/", "description": "the ad-hoc rollout"},
                    {"url": "/r/{key}", "description": "a registered rollout key",
                     "variables": {"key": {"default": "KEY"}}}],
        "paths": paths,
        "components": {"schemas": components},
    }
