/* handlers: one file per REST resource; each parses and validates its input,
 * calls db/ or the engine, and replies. Prototypes of every handler. */
#ifndef HOOKFLOW_HANDLERS_H
#define HOOKFLOW_HANDLERS_H

#include "service/http.h"

/* handlers/health.c */
void handle_healthz(struct http_req *r);
void handle_readyz(struct http_req *r);
void handle_metrics(struct http_req *r);
void handle_openapi(struct http_req *r);

/* handlers/dashboard.c */
void handle_dashboard(struct http_req *r);
/* The Content-Security-Policy of the page `page` (`len` bytes, borrowed):
 * its first inline <script> and <style> blocks allowed by SHA-256, requests
 * to its own origin, nothing else, no framing. Written to `out` (`cap`
 * bytes, 512 suffice). Pure. */
void dashboard_csp(const char *page, size_t len, char *out, size_t cap);

/* handlers/workflows.c */
void handle_workflow_put(struct http_req *r);
void handle_workflow_get(struct http_req *r);
void handle_workflow_list(struct http_req *r);
void handle_workflow_delete(struct http_req *r);
void handle_workflow_rotate(struct http_req *r);
void handle_workflow_pause(struct http_req *r);
void handle_workflow_resume(struct http_req *r);

/* handlers/runs.c */
void handle_run_submit(struct http_req *r);
void handle_run_get(struct http_req *r);
void handle_run_steps(struct http_req *r);
void handle_run_children(struct http_req *r);
void handle_run_list(struct http_req *r);
void handle_run_cancel(struct http_req *r);
void handle_run_rerun(struct http_req *r);
void handle_run_cancel_many(struct http_req *r);

/* handlers/stats.c */
void handle_workflow_stats(struct http_req *r);
void handle_stats_series(struct http_req *r);
void handle_run_callbacks(struct http_req *r);

/* handlers/schedules.c */
void handle_schedule_put(struct http_req *r);
void handle_schedule_get(struct http_req *r);
void handle_schedule_list(struct http_req *r);
void handle_schedule_delete(struct http_req *r);
void handle_schedule_pause(struct http_req *r);
void handle_schedule_resume(struct http_req *r);
void handle_schedule_trigger(struct http_req *r);
void handle_schedule_backfill(struct http_req *r);

/* handlers/attempts.c */
void handle_step_complete(struct http_req *r);
void handle_step_heartbeat(struct http_req *r);

/* handlers/groups.c */
void handle_group_put(struct http_req *r);
void handle_group_get(struct http_req *r);
void handle_group_cancel(struct http_req *r);
void handle_group_delete(struct http_req *r);

/* handlers/deadletters.c */
void handle_deadletter_list(struct http_req *r);
void handle_deadletter_redrive(struct http_req *r);
void handle_deadletter_delete(struct http_req *r);

/* handlers/signals.c */
void handle_signal_send(struct http_req *r);
void handle_signal_clear(struct http_req *r);

/* handlers/memo.c */
void handle_memo_get(struct http_req *r);
void handle_memo_put(struct http_req *r);
void handle_memo_delete(struct http_req *r);

/* handlers/endpoints.c */
void handle_endpoint_list(struct http_req *r);

/* handlers/whoami.c */
void handle_whoami(struct http_req *r);

/* handlers/kv.c */
void handle_kv_get(struct http_req *r);
void handle_kv_list(struct http_req *r);
void handle_kv_put(struct http_req *r);
void handle_kv_delete(struct http_req *r);

#endif
