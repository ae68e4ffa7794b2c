"""The schemas of hookflow's API as TypedDicts (Run, Workflow, StepRequest, ...),
generated from openapi/openapi.yaml into hookflow/_generated.py."""
from ._generated import *  # noqa: F401,F403
from ._generated import __all__  # noqa: F401
