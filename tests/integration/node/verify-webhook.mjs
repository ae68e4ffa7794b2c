// verify-webhook.mjs: checks Standard Webhooks signatures with the Standard
// Webhooks project's own JavaScript library (npm "standardwebhooks", pinned
// in package-lock.json), so the integration suite does not only trust its own
// Python reimplementation (tests/integration/harness.py verify_signature).
//
// stdin: one JSON object {"secret": "whsec_...", "headers": {...},
//        "body_base64": "..."} (or "body": "<text>"); exit 0 when the library
//        accepts it, 1 when it refuses it (the reason on stderr).
//     or a JSON array of such objects: prints a JSON array with, for each,
//        true or the library's refusal message; exit 0.
// Exit 2 on a malformed input. Used by tests/integration/webhook_verify.py.
import { Webhook } from "standardwebhooks";

function verify(item) {
  if (item === null || typeof item !== "object" || typeof item.secret !== "string" ||
      item.headers === null || typeof item.headers !== "object") {
    throw new TypeError("each item needs secret (string) and headers (object)");
  }
  const body = typeof item.body_base64 === "string"
    ? Buffer.from(item.body_base64, "base64")
    : Buffer.from(String(item.body ?? ""), "utf8");
  try {
    // jsonParse: false: only the signature is in question here, not the body.
    new Webhook(item.secret).verify(body, item.headers, { jsonParse: false });
    return true;
  } catch (e) {
    return String(e && e.message ? e.message : e);
  }
}

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
let input;
try {
  input = JSON.parse(Buffer.concat(chunks).toString("utf8"));
} catch (e) {
  process.stderr.write(`verify-webhook: stdin is not JSON: ${e.message}\n`);
  process.exit(2);
}
try {
  if (Array.isArray(input)) {
    process.stdout.write(JSON.stringify(input.map(verify)) + "\n");
    process.exit(0);
  }
  const r = verify(input);
  if (r === true) process.exit(0);
  process.stderr.write(`verify-webhook: ${r}\n`);
  process.exit(1);
} catch (e) {
  process.stderr.write(`verify-webhook: ${e.message}\n`);
  process.exit(2);
}
