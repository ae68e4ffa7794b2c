/* routes: every endpoint of the service, in one table. */
#include "handlers/routes.h"

#include "handlers/handlers.h"

const struct route routes[] = {
	{"GET", "/healthz", handle_healthz, ROUTE_PUBLIC},
	{"GET", "/readyz", handle_readyz, ROUTE_PUBLIC},
	{"GET", "/metrics", handle_metrics, ROUTE_PUBLIC},
	{"GET", "/openapi.yaml", handle_openapi, ROUTE_PUBLIC},
	{"GET", "/", handle_dashboard, ROUTE_PUBLIC},
	{"GET", "/v1/workflows", handle_workflow_list, ROUTE_API},
	{"PUT", "/v1/workflows/{}", handle_workflow_put, ROUTE_API},
	{"GET", "/v1/workflows/{}", handle_workflow_get, ROUTE_API},
	{"DELETE", "/v1/workflows/{}", handle_workflow_delete, ROUTE_API},
	{"POST", "/v1/runs", handle_run_submit, ROUTE_API},
	{"GET", "/v1/runs", handle_run_list, ROUTE_API},
	{"GET", "/v1/runs/{}", handle_run_get, ROUTE_API},
	{"GET", "/v1/runs/{}/steps", handle_run_steps, ROUTE_API},
	{"POST", "/v1/runs/{}/cancel", handle_run_cancel, ROUTE_API},
	{"POST", "/v1/runs/{}/rerun", handle_run_rerun, ROUTE_API},
	{"POST", "/v1/runs:cancel", handle_run_cancel_many, ROUTE_API},
	{"PUT", "/v1/groups/{}", handle_group_put, ROUTE_API},
	{"GET", "/v1/groups/{}", handle_group_get, ROUTE_API},
	{"DELETE", "/v1/groups/{}", handle_group_delete, ROUTE_API},
	{"POST", "/v1/groups/{}/cancel", handle_group_cancel, ROUTE_API},
	{"GET", "/v1/dead-letters", handle_deadletter_list, ROUTE_API},
	{"POST", "/v1/dead-letters/{}/redrive", handle_deadletter_redrive, ROUTE_API},
	{"DELETE", "/v1/dead-letters/{}", handle_deadletter_delete, ROUTE_API},
	{"GET", "/v1/runs/{}/memo/{}", handle_memo_get, ROUTE_MEMO},
	{"PUT", "/v1/runs/{}/memo/{}", handle_memo_put, ROUTE_MEMO},
	{"DELETE", "/v1/runs/{}/memo/{}", handle_memo_delete, ROUTE_MEMO},
	{"GET", "/v1/runs/{}/steps/{}/memo/{}", handle_memo_get, ROUTE_MEMO},
	{"PUT", "/v1/runs/{}/steps/{}/memo/{}", handle_memo_put, ROUTE_MEMO},
	{"DELETE", "/v1/runs/{}/steps/{}/memo/{}", handle_memo_delete, ROUTE_MEMO},
	{"POST", "/v1/signals/{}", handle_signal_send, ROUTE_API},
	{"DELETE", "/v1/signals/{}", handle_signal_clear, ROUTE_API},
	{"GET", "/v1/kv", handle_kv_list, ROUTE_API},
	{"GET", "/v1/kv/{}", handle_kv_get, ROUTE_API},
	{"PUT", "/v1/kv/{}", handle_kv_put, ROUTE_API},
	{"DELETE", "/v1/kv/{}", handle_kv_delete, ROUTE_API},
};

const int routes_count = sizeof routes / sizeof routes[0];
