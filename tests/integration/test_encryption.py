"""Secrets at rest (README, "Security"): with HOOKFLOW_ENCRYPTION_KEY, workflow
signing secrets and delivery-token keys are stored sealed (AES-256-GCM), so a
dump of the database alone does not reveal them; plain ones are sealed at
start-up; a wrong or missing key is a clear start-up error that changes
nothing; without a key, secrets are stored as given."""

import base64
import os

import pytest

from harness import StepScript, new_secret, succeed, verify_signature

KEY = base64.b64encode(b"k" * 32).decode()
OTHER_KEY = base64.b64encode(b"o" * 32).decode()


def dump_text(db):
    """Every text a dump of the hookflow tables would hold, as one string."""
    rows = db.sql("SELECT string_agg(t::text, E'\\n') FROM ("
                  "SELECT row_to_json(w)::text AS t FROM workflow w "
                  "UNION ALL SELECT row_to_json(k)::text FROM hf_token_key k "
                  "UNION ALL SELECT row_to_json(m)::text FROM hf_meta m) x")
    return rows[0][0] or ""


def token_key_secrets(db):
    return [r[0] for r in db.sql("SELECT secret FROM hf_token_key ORDER BY kid")]


def signed_run(api, webhook, secret, wf="wf"):
    webhook.route("/steps", StepScript({0: succeed("ok")}))
    api.put_workflow(wf, webhook.url(), secret=secret)
    rid = api.submit(wf)["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    req = webhook.requests(run_id=rid)[-1]
    assert verify_signature(secret, req.headers, req.body), req.headers
    return req


def test_with_a_key_secrets_are_stored_sealed_and_still_sign(services, db, webhook):
    svc = services.start(HOOKFLOW_ENCRYPTION_KEY=KEY)
    secret = new_secret()
    signed_run(svc.api, webhook, secret)
    stored = db.scalar("SELECT secret FROM workflow WHERE name = 'wf'")
    assert stored.startswith("enc:v1:"), stored
    assert all(s.startswith("enc:v1:") for s in token_key_secrets(db))
    text = dump_text(db)
    assert secret not in text and secret[len("whsec_"):] not in text
    # The delivery tokens' keys are not in the dump either: a token made with
    # a key read from the dump would be accepted, so none may be readable.
    assert "memo_key" not in text


def test_plain_secrets_are_sealed_at_start_up_when_a_key_is_set(services, db, webhook):
    svc = services.start()
    secret = new_secret()
    signed_run(svc.api, webhook, secret)
    assert db.scalar("SELECT secret FROM workflow WHERE name = 'wf'") == secret  # no key: as given
    svc.stop()

    svc = services.start(HOOKFLOW_ENCRYPTION_KEY=KEY)
    assert "sealed the stored secrets" in svc.log_text()
    assert db.scalar("SELECT secret FROM workflow WHERE name = 'wf'").startswith("enc:v1:")
    assert all(s.startswith("enc:v1:") for s in token_key_secrets(db))
    signed_run(svc.api, webhook, secret, wf="wf")


def test_a_wrong_key_or_no_key_is_a_clear_start_up_error_that_changes_nothing(services, db, webhook):
    svc = services.start(HOOKFLOW_ENCRYPTION_KEY=KEY)
    signed_run(svc.api, webhook, new_secret())
    svc.stop()
    sealed = (db.scalar("SELECT secret FROM workflow WHERE name = 'wf'"), token_key_secrets(db))

    for env, message in ((dict(HOOKFLOW_ENCRYPTION_KEY=OTHER_KEY), "does not open the stored secrets"),
                         (dict(HOOKFLOW_ENCRYPTION_KEY=None), "set HOOKFLOW_ENCRYPTION_KEY")):
        bad = services.new(**env)
        bad.start(wait_ready=False)
        code = bad.wait_exit(30)
        assert code not in (None, 0), bad.log_tail()
        assert message in bad.log_text(), bad.log_tail()
        assert (db.scalar("SELECT secret FROM workflow WHERE name = 'wf'"), token_key_secrets(db)) == sealed


@pytest.mark.parametrize("value", ["short", base64.b64encode(b"k" * 31).decode(), "not base64!"])
def test_a_malformed_key_stops_start_up_naming_the_variable(services, value):
    bad = services.new(HOOKFLOW_ENCRYPTION_KEY=value)
    bad.start(wait_ready=False)
    assert bad.wait_exit(30) not in (None, 0)
    assert "HOOKFLOW_ENCRYPTION_KEY: must be the standard base64 of 32 random bytes" in bad.log_text()


def test_with_a_key_a_rotation_signs_with_both_sealed_secrets_and_a_same_put_keeps_them(
        services, db, webhook):
    svc = services.start(HOOKFLOW_ENCRYPTION_KEY=KEY)
    old = new_secret()
    signed_run(svc.api, webhook, old)
    r = svc.api.post("/v1/workflows/wf/secret", {"grace_ms": 600000})
    assert r.status == 200, r
    new = r.body["secret"]
    assert db.scalar("SELECT secret_previous FROM workflow WHERE name = 'wf'").startswith("enc:v1:")
    # PUT of the current secret again is "the same secret": the rotation stays.
    assert svc.api.put("/v1/workflows/wf", {"url": webhook.url(), "secret": new}).status == 200
    assert svc.api.get("/v1/workflows/wf").body["previous_secret_valid_until"] is not None
    rid = svc.api.submit("wf")["run_id"]
    assert svc.api.wait_terminal(rid)["status"] == "succeeded"
    req = webhook.requests(run_id=rid)[-1]
    assert len(req.headers["webhook-signature"].split(" ")) == 2, req.headers
    assert verify_signature(new, req.headers, req.body) and verify_signature(old, req.headers, req.body)
    text = dump_text(db)
    assert old not in text and new not in text
