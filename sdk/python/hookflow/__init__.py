"""hookflow's Python SDK (standard library only).

    hookflow.Client         the REST API: one method per operation, typed answers,
                            HookflowError for error answers, wait_for_run, paginate
    hookflow.webhook        the webhook side: verify_signature, the outcome builders
                            (continue_with, wait_for_signal, start_children, succeed,
                            fail, cancel, pending, transient_error, permanent_error),
                            StepContext (memo, complete, heartbeat), http_handler and
                            wsgi_app
    hookflow.types          the API's schemas as TypedDicts
"""
from . import types, webhook
from ._generated import OPERATIONS
from .client import TERMINAL_STATUSES, Client, HookflowError
from .webhook import (StepContext, StepError, WebhookVerificationError, cancel, continue_with,
                      fail, handle_delivery, http_handler, pending, permanent_error, sign,
                      start_children, succeed, transient_error, verify_signature,
                      wait_for_signal, wsgi_app)

__version__ = "0.1.0"

__all__ = [
    "Client", "HookflowError", "OPERATIONS", "TERMINAL_STATUSES", "types", "webhook",
    "StepContext", "StepError", "WebhookVerificationError", "cancel", "continue_with", "fail",
    "handle_delivery", "http_handler", "pending", "permanent_error", "sign", "start_children",
    "succeed", "transient_error", "verify_signature", "wait_for_signal", "wsgi_app",
]
