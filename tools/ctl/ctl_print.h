/*
 * ctl_print.h - what kvindexctl prints: tables whose columns are as wide
 * as their widest cell, sizes and durations made short, the API's own
 * JSON passed through, and the API's error messages.
 *
 * A table is filled row by row, then printed whole to standard output:
 * a header in capitals, then each row, columns two spaces apart, the last
 * column not padded. A cell with no value is "-", so that every column of
 * every line is one word or more and never empty (awk counts the same
 * fields on every line) - only the last column, the free text of an
 * error, may hold spaces.
 */
#ifndef KVI_TOOLS_CTL_PRINT_H
#define KVI_TOOLS_CTL_PRINT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctl_http.h"

typedef struct ctl_table ctl_table;

/* ctl_table_alloc returns a table of the n columns named (copied). */
ctl_table *ctl_table_alloc(const char *const *headers, size_t n);

/* ctl_table_row starts a row; ctl_table_cell fills its next cell, printf
 * style ("" is written "-"). */
void ctl_table_row(ctl_table *t);
void ctl_table_cell(ctl_table *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ctl_table_rows says how many rows t has. */
size_t ctl_table_rows(const ctl_table *t);

/* ctl_table_print prints t to out; ctl_table_free frees it. */
void ctl_table_print(const ctl_table *t, FILE *out);
void ctl_table_free(ctl_table *t);

/* ctl_fmt_bytes writes n bytes shortly ("512B", "40.0MiB") into buf. */
void ctl_fmt_bytes(char *buf, size_t len, uint64_t n);

/* ctl_fmt_ms writes a duration in ms shortly ("212ms", "5.2s", "3m10s")
 * into buf; "never" for a JSON null (v). */
void ctl_fmt_ms(char *buf, size_t len, const json_t *v);

/* ctl_str returns the string at key of o, or dflt when it is absent or
 * not a string. ctl_int returns the integer, or 0. */
const char *ctl_str(const json_t *o, const char *key, const char *dflt);
long long ctl_int(const json_t *o, const char *key);

/* ctl_print_raw writes the len bytes of an answer's body to standard
 * output as they came, with a new line after them. */
void ctl_print_raw(const char *body, size_t len);

/* ctl_print_error writes the API's error answer r to standard error:
 * "kvindexctl: <its message> (HTTP <status>)"; a redirect not followed,
 * or an answer without a message, is described instead. */
void ctl_print_error(const ctl_resp *r);

#endif /* KVI_TOOLS_CTL_PRINT_H */
