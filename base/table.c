/* table: aligned text tables for the command line client. */
#include "base/table.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The length of the well-formed UTF-8 sequence at s[0..n), or 0 when it is
 * not one (overlong, surrogate, above U+10FFFF, cut short). *cp is the code
 * point. */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t v, min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if (c >= 0xc2 && c <= 0xdf) {
		len = 2, v = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3, v = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

void table_clean(const char *s, size_t max, struct strbuf *out)
{
	if (s == NULL)
		s = "-";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0, count = 0, start = out->len;
	while (i < n) {
		if (max > 0 && count == max) {
			/* Cut: the last three code points written become "...". */
			size_t drop = 0, at = out->len;
			while (drop < 3 && at > start && !out->oom) {
				at--;
				if ((out->data[at] & 0xc0) != 0x80)
					drop++;
			}
			out->len = at;
			if (out->data != NULL)
				out->data[at] = '\0';
			strbuf_puts(out, "...");
			return;
		}
		uint32_t cp = 0;
		size_t len = utf8_seq(p + i, n - i, &cp);
		if (len == 0) {
			strbuf_puts(out, "?");
			i++;
		} else if (cp == '\t' || cp == '\n' || cp == '\r') {
			strbuf_puts(out, " ");
			i += len;
		} else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
			strbuf_puts(out, "?");
			i += len;
		} else {
			strbuf_add(out, s + i, len);
			i += len;
		}
		count++;
	}
}

size_t table_width(const char *s)
{
	size_t w = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if ((*p & 0xc0) != 0x80)
			w++;
	return w;
}

static char *cleaned(const char *s, size_t max)
{
	struct strbuf b = {0};
	table_clean(s, max, &b);
	if (b.oom) {
		strbuf_cleanup(&b);
		return NULL;
	}
	return b.data != NULL ? strbuf_take(&b) : strdup("");
}

void table_init(struct table *t, int ncols, const char *const headers[], size_t max_cell)
{
	memset(t, 0, sizeof *t);
	t->ncols = ncols < 1 ? 1 : ncols > TABLE_MAX_COLS ? TABLE_MAX_COLS : ncols;
	t->max_cell = max_cell;
	table_add_row(t, headers);
}

void table_add_row(struct table *t, const char *const cells[])
{
	if (t->oom)
		return;
	size_t need = (t->nrows + 1) * (size_t)t->ncols;
	if (need > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : (size_t)t->ncols * 16;
		while (cap < need)
			cap *= 2;
		char **grown = realloc(t->cells, cap * sizeof *grown);
		if (grown == NULL) {
			t->oom = true;
			return;
		}
		t->cells = grown;
		t->cap = cap;
	}
	char **row = t->cells + t->nrows * (size_t)t->ncols;
	for (int c = 0; c < t->ncols; c++) {
		size_t max = c + 1 < t->ncols ? t->max_cell : t->max_cell * 4;
		row[c] = cleaned(cells[c], max);
		if (row[c] == NULL) {
			for (int k = 0; k < c; k++)
				free(row[k]);
			t->oom = true;
			return;
		}
	}
	t->nrows++;
}

void table_render(const struct table *t, struct strbuf *out)
{
	size_t width[TABLE_MAX_COLS] = {0};
	for (size_t r = 0; r < t->nrows; r++)
		for (int c = 0; c < t->ncols; c++) {
			size_t w = table_width(t->cells[r * (size_t)t->ncols + c]);
			if (w > width[c])
				width[c] = w;
		}
	for (size_t r = 0; r < t->nrows; r++) {
		size_t line_start = out->len;
		for (int c = 0; c < t->ncols; c++) {
			const char *cell = t->cells[r * (size_t)t->ncols + c];
			strbuf_puts(out, cell);
			if (c + 1 < t->ncols)
				strbuf_printf(out, "%*s",
					      (int)(width[c] - table_width(cell) + TABLE_GAP), "");
		}
		/* No trailing spaces when the last cells are empty. */
		while (out->len > line_start && out->data[out->len - 1] == ' ')
			out->len--;
		strbuf_puts(out, "\n");
	}
}

void table_cleanup(struct table *t)
{
	for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof *t);
}
