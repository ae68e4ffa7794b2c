"""Standard Webhooks verification by the Standard Webhooks project's own
JavaScript library (npm standardwebhooks, pinned in node/package-lock.json and
installed by scripts/integration.sh), run through node/verify-webhook.mjs.

verify_with_library(cases) takes (secret, request) pairs, request being a
harness.Request, and returns for each True or the library's refusal message:
one Node process for the whole batch."""

import base64
import json
import os
import shutil
import subprocess

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")
SCRIPT = os.path.join(NODE_DIR, "verify-webhook.mjs")


def _check_installed():
    node = shutil.which("node")
    assert node, "node is not installed (scripts/deps.sh)"
    lib = os.path.join(NODE_DIR, "node_modules", "standardwebhooks", "package.json")
    assert os.path.exists(lib), (
        "standardwebhooks is not installed in %s: run the suite with scripts/integration.sh "
        "(it runs npm ci there) or run `npm ci` in that folder" % NODE_DIR)
    return node


def verify_with_library(cases, timeout=60):
    """cases: list of (secret, request). Returns a list of True (the library
    accepts the request's webhook-signature under that secret) or a string
    (its refusal)."""
    if not cases:
        return []
    node = _check_installed()
    items = [{
        "secret": secret,
        "headers": {k: v for k, v in req.headers.items() if k.startswith("webhook-")},
        "body_base64": base64.b64encode(req.body).decode(),
    } for secret, req in cases]
    proc = subprocess.run([node, SCRIPT], input=json.dumps(items).encode(), capture_output=True,
                          timeout=timeout, cwd=NODE_DIR)
    assert proc.returncode == 0, "verify-webhook.mjs failed (%d): %s" % (
        proc.returncode, proc.stderr.decode(errors="replace"))
    out = json.loads(proc.stdout)
    assert len(out) == len(items), out
    return out
