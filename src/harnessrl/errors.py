"""The root of the errors harnessrl raises on purpose, and where each one lives.

Catch `HarnessRLError` to handle every deliberate failure of harnessrl at once; each error also
keeps the standard base it always had (ValueError for bad input, RuntimeError for a failed
operation, FileNotFoundError for a missing run), so existing `except ValueError` code still works.
Errors are defined next to the code that raises them; this module only holds the root.

    HarnessRLError
    ├── ConfigError            config/load.py        a run config file or override is invalid
    ├── TrainError             run/errors.py         a training run cannot start or continue
    ├── TaskError              tasks/model.py        a task or task directory is malformed
    │   └── TaskDataError                            task data refused: link, special file, size, UTF-8
    ├── VerifierOutputError    tasks/verifier.py     a verifier printed no usable reward
    ├── HarnessConfigError     harness/base.py       unknown harness, profile or option
    ├── InstallError           harness/install.py    a harness could not be installed
    ├── SandboxError           sandbox/base.py       a sandbox failed to start or run
    │   ├── SandboxUnavailable                       the backend cannot run here (no bwrap, not Linux)
    │   │   ├── SeccompUnavailable sandbox/seccomp.py no libseccomp: sandboxes run without the filter
    │   │   └── HostUnfit      sandbox/health.py     a damaged host (device node, sandbox start)
    │   ├── SandboxClosed                            the sandbox was already destroyed
    │   ├── WorkspaceLost                            the workspace could not be copied out to score it
    │   │   ├── WorkspaceLimitExceeded sandbox/treeops.py a workspace tree passed a host-side limit (scored 0)
    │   │   └── WorkspaceLinkRefused sandbox/views.py  a link into the verifier's files or out of the workspace (scored 0)
    │   ├── ImageError         tasks/images.py       a task's image cannot be read or unpacked
    │   ├── ImageRootError     sandbox/rootfs.py     a task's root file system cannot host a sandbox
    │   └── RelayClosed        sandbox/relay.py      (internal) the relay is done with a connection
    ├── EngineError            engine/base.py        generation or weight update failed
    │   ├── EngineOverloaded                         too many waiting requests (HTTP 529 / 429)
    │   └── PromptTooLong                            prompt + max_tokens exceed the context window
    ├── ModelNotFound          engine/model.py       no checkpoint at the path / in the cache
    ├── RenderError            render/errors.py      a conversation cannot be rendered or parsed
    │   ├── TemplateError                            the chat template cannot be used as is
    │   ├── RenderInputError                         the request's messages or tools are invalid
    │   └── ShellOverrideError render/bash_format.py a `command:` shell tool override is not NAME:ARG:KIND
    ├── ProxyError             proxy/errors.py       a typed error answered in the caller's protocol
    ├── TooDeep                proxy/jsonutil.py     (internal) JSON nested past MAX_JSON_DEPTH: a typed 400
    ├── ProxyStartError        proxy/server.py       the proxy could not start listening
    ├── ClientGone             proxy/httputil.py     the client hung up mid-request (not reported)
    ├── ProxyLinkError         rollout/proxy_link.py a running proxy cannot be reached or refused
    ├── RolloutsFailed         rollout/jobs.py       every rollout of a batch failed before calling the model
    ├── SFTDataError           sft/data.py           no usable SFT data: no passing rollout, mixed tokenizers
    ├── ColdStartError         sft/cold_start.py     a run's cold start has no passing demonstration
    ├── ReferencePolicyError   sft/reference.py      the reference policy cannot serve these tasks (format, no solution)
    ├── TransferError          report/transfer.py    a run holds no before/after eval to compare
    ├── ExperimentError        experiment/arms.py    an experiment file, arm or seed list is invalid
    ├── BaselineError          experiment/shared_baseline.py a shared baseline eval cannot serve a run
    ├── StoreError             store/run_store.py    the run store is unusable (schema, corruption)
    ├── ExportError            store/export.py       an export format or path is invalid
    ├── RunNotFound            tree/run_trees.py     the directory holds no run store
    ├── HostCopyFailed         sandbox/treeops.py    (OSError) a host-side copy failed for the host's reason
    ├── ForestOrderError       train/packing.py      a packed forest is not in DFS order
    └── RayUnavailable         cluster/ray_cluster.py cluster.backend=ray without a usable Ray

`tests/test_errors.py` checks that this tree and the code agree.
"""

from __future__ import annotations


class HarnessRLError(Exception):
    """Base of every error harnessrl raises on purpose (the tree is in this module's docstring)."""
