/*
 * api_packed.h - the compact form of POST /query, /query_by_hash and
 * /routed (docs/api.md#compact-request-bodies): the prompt as a body of
 * packed little-endian integers, every other field a query-string
 * parameter.
 *
 * A body of Content-Type application/octet-stream is a /query's token ids,
 * 4 bytes each, or a /query_by_hash's local block hashes, 8 bytes each
 * (a /routed takes token ids, or block hashes with
 * prompt=block_hashes). The parameters have the JSON fields' names and
 * meanings: model_name (required), lora_name, cache_salt, instances (a
 * comma-separated list), dp_rank, top_k, pending (true or false), and
 * /routed's pod, instance_id and ttl_ms. Multimodal items are JSON only.
 *
 * Nothing is parsed in the body: its bytes are copied once into the
 * request's array. Unlike a JSON body's unknown fields, an unknown or
 * repeated parameter is refused: a query string is made by the router
 * that sends it, and a misspelt top_k would otherwise ask for every
 * listener without a word. Errors use the JSON form's words and order
 * (model_name first) and statuses: 400, and 413 past the request's
 * maximum of tokens or hashes.
 */
#ifndef KVI_COORDINATOR_API_PACKED_H
#define KVI_COORDINATOR_API_PACKED_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "qerr.h"
#include "qreq.h"

/* The routes that take a packed body. */
typedef enum kvc_packed_route {
	KVC_PACKED_QUERY,      /* POST /query: token ids */
	KVC_PACKED_HASH_QUERY, /* POST /query_by_hash: block hashes */
	KVC_PACKED_ROUTED,     /* POST /routed: either */
} kvc_packed_route;

/* kvc_packed_copy_fn copies a request's body, body_len bytes, to dst. */
typedef void (*kvc_packed_copy_fn)(void *arg, void *dst);

/* kvc_api_is_packed says whether a request's Content-Type (NULL when it
 * has none) names the packed form: application/octet-stream, in any
 * case, with or without parameters. */
bool kvc_api_is_packed(const char *content_type);

/* kvc_api_packed_parse reads a packed request for route into *out: its
 * parameters (params[2i] a name, params[2i+1] its value, n of them,
 * decoded) and its body of body_len bytes, which it copies with copy(arg,
 * dst) once the parameters are good; at most max tokens or hashes. */
kvi_err kvc_api_packed_parse(kvc_packed_route route, const char *const *params,
			     size_t n, size_t body_len, kvc_packed_copy_fn copy,
			     void *arg, size_t max, kvc_qreq *out,
			     kvc_qerr *err);

#endif /* KVI_COORDINATOR_API_PACKED_H */
