/* routes: every endpoint of the service, in one table. */
#include "handlers/routes.h"

#include "handlers/handlers.h"

const struct http_route routes[] = {
	{"GET", "/healthz", handle_healthz, HTTP_AUTH_PUBLIC},
	{"GET", "/readyz", handle_readyz, HTTP_AUTH_PUBLIC},
	{"GET", "/metrics", handle_metrics, HTTP_AUTH_PUBLIC},
	{"GET", "/openapi.yaml", handle_openapi, HTTP_AUTH_PUBLIC},
	{"GET", "/", handle_dashboard, HTTP_AUTH_PUBLIC},
	{"GET", "/v1/whoami", handle_whoami, HTTP_AUTH_API},
	{"GET", "/v1/endpoints", handle_endpoint_list, HTTP_AUTH_API},
	{"GET", "/v1/workflows", handle_workflow_list, HTTP_AUTH_API},
	{"PUT", "/v1/workflows/{}", handle_workflow_put, HTTP_AUTH_API},
	{"GET", "/v1/workflows/{}", handle_workflow_get, HTTP_AUTH_API},
	{"DELETE", "/v1/workflows/{}", handle_workflow_delete, HTTP_AUTH_API},
	{"POST", "/v1/workflows/{}/secret", handle_workflow_rotate, HTTP_AUTH_API},
	{"POST", "/v1/workflows/{}/pause", handle_workflow_pause, HTTP_AUTH_API},
	{"POST", "/v1/workflows/{}/resume", handle_workflow_resume, HTTP_AUTH_API},
	{"POST", "/v1/runs", handle_run_submit, HTTP_AUTH_API},
	{"GET", "/v1/runs", handle_run_list, HTTP_AUTH_API},
	{"GET", "/v1/runs/{}", handle_run_get, HTTP_AUTH_API},
	{"GET", "/v1/runs/{}/steps", handle_run_steps, HTTP_AUTH_API},
	{"POST", "/v1/runs/{}/cancel", handle_run_cancel, HTTP_AUTH_API},
	{"POST", "/v1/runs/{}/rerun", handle_run_rerun, HTTP_AUTH_API},
	{"POST", "/v1/runs:cancel", handle_run_cancel_many, HTTP_AUTH_API},
	{"PUT", "/v1/groups/{}", handle_group_put, HTTP_AUTH_API},
	{"GET", "/v1/groups/{}", handle_group_get, HTTP_AUTH_API},
	{"DELETE", "/v1/groups/{}", handle_group_delete, HTTP_AUTH_API},
	{"POST", "/v1/groups/{}/cancel", handle_group_cancel, HTTP_AUTH_API},
	{"GET", "/v1/dead-letters", handle_deadletter_list, HTTP_AUTH_API},
	{"POST", "/v1/dead-letters/{}/redrive", handle_deadletter_redrive, HTTP_AUTH_API},
	{"DELETE", "/v1/dead-letters/{}", handle_deadletter_delete, HTTP_AUTH_API},
	{"GET", "/v1/runs/{}/memo/{}", handle_memo_get, HTTP_AUTH_MEMO},
	{"PUT", "/v1/runs/{}/memo/{}", handle_memo_put, HTTP_AUTH_MEMO},
	{"DELETE", "/v1/runs/{}/memo/{}", handle_memo_delete, HTTP_AUTH_MEMO},
	{"GET", "/v1/runs/{}/steps/{}/memo/{}", handle_memo_get, HTTP_AUTH_MEMO},
	{"PUT", "/v1/runs/{}/steps/{}/memo/{}", handle_memo_put, HTTP_AUTH_MEMO},
	{"DELETE", "/v1/runs/{}/steps/{}/memo/{}", handle_memo_delete, HTTP_AUTH_MEMO},
	{"POST", "/v1/signals/{}", handle_signal_send, HTTP_AUTH_API},
	{"DELETE", "/v1/signals/{}", handle_signal_clear, HTTP_AUTH_API},
	{"GET", "/v1/kv", handle_kv_list, HTTP_AUTH_API},
	{"GET", "/v1/kv/{}", handle_kv_get, HTTP_AUTH_API},
	{"PUT", "/v1/kv/{}", handle_kv_put, HTTP_AUTH_API},
	{"DELETE", "/v1/kv/{}", handle_kv_delete, HTTP_AUTH_API},
};

const int routes_count = sizeof routes / sizeof routes[0];
