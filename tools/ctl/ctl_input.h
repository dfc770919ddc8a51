/*
 * ctl_input.h - the texts kvindexctl reads, parsed without I/O: a list of
 * block hashes (--hashes), and the elements of a JSON array found in its
 * text without parsing them (the pages of GET /workers, merged into one
 * array whose entries are the API's own bytes).
 *
 * Parsers take bytes and return values; the caller owns what they
 * allocate. Errors say where, in err.
 */
#ifndef KVI_TOOLS_CTL_INPUT_H
#define KVI_TOOLS_CTL_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* ctl_hashes_parse reads block hashes from text (len bytes): decimal u64
 * separated by white space or commas, optionally inside '[' ']' and each
 * optionally between double quotes - a JSON array of numbers or of
 * decimal strings, or one hash a line. *out (kvi_free) gets n of them.
 * KVI_EINVAL names the first word that is not a u64; KVI_ENOENT when
 * there is none. */
kvi_err ctl_hashes_parse(const char *text, size_t len, uint64_t **out,
			 size_t *n, char *err, size_t errlen);

/* Where one element of a JSON array lies in its text. */
typedef struct ctl_span {
	size_t off, len;
} ctl_span;

/* ctl_json_items finds the elements of the JSON array in text (len bytes)
 * as spans of it, white space around them left out: *out (kvi_free) gets
 * n of them. Only the nesting of brackets and braces, strings and commas
 * are read: an element is not checked to be valid JSON. KVI_EPROTO when
 * text is not an array (or has something after it). */
kvi_err ctl_json_items(const char *text, size_t len, ctl_span **out, size_t *n,
		       char *err, size_t errlen);

#endif /* KVI_TOOLS_CTL_INPUT_H */
