/* table: aligned text tables and cleaned-up cells for the command line
 * client's output to people (README "Command line"). Pure.
 *
 * Cells are made safe for a terminal: control characters (C0, DEL, C1) become
 * a space when they are white space (tab, newline, carriage return) and '?'
 * otherwise, and so does every byte of invalid UTF-8, so nothing the API
 * returns (a run's error text, a payload) can move the cursor or change the
 * terminal's state. Widths count code points (a wide CJK character counts
 * one). */
#ifndef HOOKFLOW_TABLE_H
#define HOOKFLOW_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/strbuf.h"

#define TABLE_MAX_COLS 12
#define TABLE_GAP 2 /* spaces between two columns */

/* A table being filled. Every string is owned by the struct. */
struct table {
	int ncols;
	size_t nrows; /* rows added, the header included */
	size_t cap;
	char **cells; /* nrows * ncols cleaned cells, row 0 the header */
	size_t max_cell;
	bool oom; /* an allocation failed: rows are missing */
};

/* Starts a table of `ncols` (1..TABLE_MAX_COLS) columns headed `headers`
 * (borrowed, copied). Every cell but the last column's is cut to `max_cell`
 * code points (the last one to four times that), ending in "...". */
void table_init(struct table *t, int ncols, const char *const headers[], size_t max_cell);

/* Adds a row of t->ncols cells (borrowed, copied cleaned); a NULL cell is
 * written "-". */
void table_add_row(struct table *t, const char *const cells[]);

/* Appends the table to `out`: one line per row, each column padded to its
 * widest cell plus TABLE_GAP spaces, the last column not padded. */
void table_render(const struct table *t, struct strbuf *out);

/* Frees what `t` owns and zeroes it. A zeroed struct is a no-op. */
void table_cleanup(struct table *t);

/* Appends `s` (borrowed, NUL-terminated; NULL is "-") to `out` cleaned as a
 * cell and cut to `max` code points ("..." ends a cut text; 0: no cut). */
void table_clean(const char *s, size_t max, struct strbuf *out);

/* The number of code points of a cleaned cell (valid UTF-8). */
size_t table_width(const char *s);

#endif
