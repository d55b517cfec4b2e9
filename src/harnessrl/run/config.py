"""The run config schema lives in harnessrl.config (its consumers reach it without going through
run/); this name stays for the imports that still use it."""

from harnessrl.config import *  # noqa: F401,F403
from harnessrl.config import __all__  # noqa: F401
