/* check_webhook: `hookflow check-webhook URL`, the conformance check of a
 * step webhook (README "Checking a webhook"). It sends the webhook a battery
 * of step requests built and signed as hookflow builds and signs them
 * (service/stepreq.c, base/sig.c), judges each answer as hookflow would
 * (service/verdict.c), serves the requests' memo itself (cmd/memo_stub.c) so
 * that memo use can be observed, and reports item by item. It calls only URL
 * and never talks to a hookflow service or its database. */
#ifndef HOOKFLOW_CMD_CHECK_WEBHOOK_H
#define HOOKFLOW_CMD_CHECK_WEBHOOK_H

/* Runs the check: argv[1] is "check-webhook", its arguments follow (all
 * borrowed). Returns 0 when no item failed, 1 when one did, 2 on bad usage,
 * 3 when the webhook cannot be reached at all. curl_global_init must have
 * been called. */
int check_webhook_main(int argc, char **argv);

#endif
