/* Unit tests of the dashboard's Content-Security-Policy (handlers/dashboard.c):
 * its inline blocks are allowed by their SHA-256 and nothing else is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "handlers/handlers.h"

extern const char hookflow_dashboard[];
extern const unsigned long hookflow_dashboard_len;

static void test_inline_blocks_are_allowed_by_their_hash_only(void **state)
{
	(void)state;
	static const char page[] = "<html><head><style>a{}</style></head>"
				   "<body><script>x()</script><script>y()</script></body></html>";
	char csp[512];
	dashboard_csp(page, sizeof page - 1, csp, sizeof csp);
	/* sha256("x()") and sha256("a{}"), base64 */
	assert_non_null(
		strstr(csp, "script-src 'sha256-D6IGS8VMvCoyaR/l0h9tERrBTATY01CoPS7l6xDv0kI='"));
	assert_non_null(
		strstr(csp, "style-src 'sha256-X1RutGBrXCt9KkSaXMK7tHftWiRscFHOhxsS8tv8hBk='"));
	assert_non_null(strstr(csp, "default-src 'none'"));
	assert_non_null(strstr(csp, "frame-ancestors 'none'"));
	assert_non_null(strstr(csp, "connect-src 'self'"));
	assert_null(strstr(csp, "unsafe"));
}

static void test_a_page_without_blocks_allows_none(void **state)
{
	(void)state;
	static const char page[] = "<html><body>no script <script> without its end</body></html>";
	char csp[512];
	dashboard_csp(page, sizeof page - 1, csp, sizeof csp);
	assert_non_null(strstr(csp, "script-src 'none'"));
	assert_non_null(strstr(csp, "style-src 'none'"));
}

/* The served page must have exactly one of each block for its policy to
 * cover it (a second block would be refused by the browser). */
static void test_the_dashboard_has_one_script_and_one_style_block(void **state)
{
	(void)state;
	size_t len = (size_t)hookflow_dashboard_len;
	int scripts = 0, styles = 0;
	for (const char *p = hookflow_dashboard;
	     (p = memmem(p, len - (size_t)(p - hookflow_dashboard), "<script", 7)) != NULL; p += 7)
		scripts++;
	for (const char *p = hookflow_dashboard;
	     (p = memmem(p, len - (size_t)(p - hookflow_dashboard), "<style", 6)) != NULL; p += 6)
		styles++;
	assert_int_equal(scripts, 1);
	assert_int_equal(styles, 1);
	char csp[512];
	dashboard_csp(hookflow_dashboard, len, csp, sizeof csp);
	assert_non_null(strstr(csp, "script-src 'sha256-"));
	assert_non_null(strstr(csp, "style-src 'sha256-"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inline_blocks_are_allowed_by_their_hash_only),
		cmocka_unit_test(test_a_page_without_blocks_allows_none),
		cmocka_unit_test(test_the_dashboard_has_one_script_and_one_style_block),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
