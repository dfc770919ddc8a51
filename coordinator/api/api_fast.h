/*
 * api_fast.h - the fast path of POST /query parsing.
 *
 * A /query body is mostly one long array of token ids (16,000 of them for
 * a 1,000-block prompt), and building a jansson tree of it costs far more
 * than the query itself. kvc_api_query_fast() parses the common shape of
 * the body directly from its bytes, with no tree and one allocation per
 * array: an object whose known fields have the expected simple values
 * (strings without escapes, integers without sign, fraction or exponent),
 * whose other fields hold plain JSON, and with no key twice.
 *
 * It either produces exactly what kvc_api_query_parse's general path would
 * for the same bytes, or declines: anything unusual - escapes, non-ASCII
 * text, reals, big or negative numbers, duplicate keys, wrong types, too
 * many tokens, malformed JSON - is left to the general path, which
 * accepts or rejects it with its messages. The general path is therefore
 * the one definition of what a body means; fuzz_api_json checks that the
 * two agree on every body the fast path accepts.
 */
#ifndef KVI_COORDINATOR_API_FAST_H
#define KVI_COORDINATOR_API_FAST_H

#include <stdbool.h>
#include <stddef.h>

#include "api_json.h"

/* kvc_api_query_fast parses body into *out and returns true, or returns
 * false (out untouched) when the general path must decide. */
bool kvc_api_query_fast(const char *body, size_t len, size_t max_tokens,
			kvc_qreq *out);

/* kvc_api_query_parse_general is kvc_api_query_parse without the fast
 * path (for tests and the fuzzer). */
kvi_err kvc_api_query_parse_general(const char *body, size_t len,
				    size_t max_tokens, kvc_qreq *out,
				    kvc_qerr *err);

#endif /* KVI_COORDINATOR_API_FAST_H */
