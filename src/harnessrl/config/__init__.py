"""The run config schema: one pydantic model per component (sections.py), composed into `RunConfig`
(schema.py), read from YAML with overrides (load.py); older keys migrate with a warning (migrate.py).

Its consumers (app/, run/, the serving launch) import it from here, without going through run/."""

from harnessrl.config.load import (ConfigError, apply_override, build_config, config_with, invalid_message,
                                   load_config, read_config, valid_keys, validate_files)
from harnessrl.config.migrate import MOVED_KEYS, REFUSED_KEYS, REMOVED_KEYS, migrate
from harnessrl.config.schema import RunConfig
from harnessrl.config.sections import (AlgorithmConfig, ClusterSection, EngineSection, EvalSet, HarnessEntry,
                                       LoopConfig, LoraConfig, ModelConfig, OptimizerConfig, OutputConfig, RaySection,
                                       RenderSection, SandboxSection, ServeSection, TasksSection, WandbSection)

__all__ = ["AlgorithmConfig", "ClusterSection", "ConfigError", "EngineSection", "EvalSet", "HarnessEntry",
           "LoopConfig", "LoraConfig", "MOVED_KEYS", "ModelConfig", "OptimizerConfig", "OutputConfig", "REFUSED_KEYS",
           "REMOVED_KEYS", "RaySection", "RenderSection", "RunConfig", "SandboxSection", "ServeSection",
           "TasksSection", "WandbSection", "apply_override", "build_config", "config_with", "invalid_message", "load_config",
           "migrate", "read_config", "valid_keys", "validate_files"]
