/*
 * api_json.h - the coordinator's HTTP API request bodies (API.md): a
 * /query or /query_by_hash body into the query path's request (qreq.h),
 * /register and /unregister bodies into what the assigner takes.
 *
 * Everything here is a pure function: request bytes in, a C value or an
 * error out. Nothing touches a socket, a registry or a shard, so the HTTP
 * handlers stay thin and every parser can be unit-tested and fuzzed on its
 * own.
 *
 * Errors. A parser that fails returns a kvi_err and fills a kvc_qerr
 * (qerr.h) with the HTTP status (400, or 413 for a request over a
 * configured limit) and a message that names the field and the value that
 * were wrong, e.g. "token_ids[3]: 4294967296 is not a u32" or "dp_rank
 * 65536 does not fit in u16".
 *
 * u64 numbers. API.md sends instance ids and block hashes as JSON numbers,
 * and they use all 64 bits; jansson's integers are int64 and it rejects a
 * literal above 2^63-1 ("too big integer"). kvc_api_json_load() therefore
 * scans the body first (outside strings, honouring escapes) for integer
 * literals that do not fit an int64 and, only when there are some, parses
 * a copy in which each such literal is replaced by a string holding a NUL
 * byte followed by the literal's text. Such a string cannot come from the
 * client: JSON can only spell a NUL as \u0000, and a body that contains one
 * is parsed as it is and rejected by jansson (as it is when nothing needed
 * rewriting). The field readers turn these strings back into exact u64
 * values, or into an error that quotes the literal ("instance_id:
 * 18446744073709551616 is not a u64"). Replacing a number token by a string
 * token keeps the body's syntax: a body whose copy fails to parse is
 * reported with jansson's message for the original text. u64 fields also
 * accept a decimal string ("18446744073709551615": digits only, no sign, no
 * leading zero), the form in which responses spell ids. Reals, negative
 * numbers and anything else are rejected, never rounded or truncated.
 *
 * Conventions of every parser: unknown fields are ignored; an optional
 * field that is null counts as absent; a required one that is null is a
 * type error; duplicate keys are rejected (a body must mean one thing).
 * Out values are written only on success and then own their memory (free
 * with the matching _fini); on failure nothing is left to free but
 * err->extra (kvc_qerr_fini).
 */
#ifndef KVI_COORDINATOR_API_JSON_H
#define KVI_COORDINATOR_API_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "error.h"
#include "pod.h"
#include "qerr.h"
#include "qreq.h"

/* ---- loading and field readers ------------------------------------------ */

/* kvc_api_json_load parses body[0..len) as a JSON object, keeping integers
 * beyond int64 exactly (see above), into *out (a new reference). Errors,
 * with err set, 400: KVI_EPROTO, with jansson's message and its line,
 * column and byte position, for a body that is not JSON; KVI_EINVAL for
 * JSON that is not an object. */
kvi_err kvc_api_json_load(const char *body, size_t len, json_t **out,
			  kvc_qerr *err);

/*
 * Field readers, for objects loaded by kvc_api_json_load. Each returns
 * KVI_OK and writes *out when the field holds a valid value. `present`
 * NULL makes the field required: absent is a 400 "<field> is missing".
 * Otherwise *present says whether it was there (absent or null: false,
 * *out untouched). A wrong type is a 400 KVI_EINVAL, a value out of range
 * a 400 KVI_ERANGE; both messages quote the value.
 */

/* kvc_api_get_u64 reads a u64 given as a JSON integer (any value up to
 * 2^64-1, exactly) or as a decimal string. */
kvi_err kvc_api_get_u64(const json_t *obj, const char *field, uint64_t *out,
			bool *present, kvc_qerr *err);

/* kvc_api_get_u16 reads an integer that must fit in a u16 ("dp_rank 65536
 * does not fit in u16"). */
kvi_err kvc_api_get_u16(const json_t *obj, const char *field, uint16_t *out,
			bool *present, kvc_qerr *err);

/* kvc_api_get_u32 reads an integer in min..max ("dp_size 0 is not in
 * 1..65536"). */
kvi_err kvc_api_get_u32(const json_t *obj, const char *field, uint32_t min,
			uint32_t max, uint32_t *out, bool *present,
			kvc_qerr *err);

/* kvc_api_get_string reads a string; *out is a new copy (kvi_free). */
kvi_err kvc_api_get_string(const json_t *obj, const char *field, char **out,
			   bool *present, kvc_qerr *err);

/* kvc_api_value_u64 reads one u64 value (an array element); `what` names
 * it in the message ("block_hashes[3]: -1 is not a u64"). */
kvi_err kvc_api_value_u64(const json_t *v, const char *what, uint64_t *out,
			  kvc_qerr *err);

/* ---- queries ------------------------------------------------------------- */

/* kvc_api_query_parse parses a POST /query body into *out. Errors: 400
 * (KVI_EPROTO not JSON, KVI_EINVAL wrong type or missing/empty model_name,
 * an mm_features entry without a non-empty identifier, or out of order,
 * overlapping its predecessor or past the prompt; KVI_ERANGE a token id
 * not a u32, an instance not a u64, dp_rank not a u16, top_k not in
 * 1..KVC_QREQ_TOP_K_MAX, an mm_features offset or length not a u64 or a
 * length of 0); 413 KVI_ETOOBIG more than max_tokens token ids. */
kvi_err kvc_api_query_parse(const char *body, size_t len, size_t max_tokens,
			    kvc_qreq *out, kvc_qerr *err);

/* kvc_api_hash_query_parse parses a POST /query_by_hash body into *out;
 * errors as kvc_api_query_parse, with at most max_hashes block hashes. */
kvi_err kvc_api_hash_query_parse(const char *body, size_t len,
				 size_t max_hashes, kvc_qreq *out,
				 kvc_qerr *err);

/* ---- registration -------------------------------------------------------- */

/* kvc_api_register_parse parses a POST /register body, in its per-rank form
 * (instance_id, endpoint, ...: a pod with name NULL, rank dp_rank or 0,
 * dp_size 1) or its per-pod form (name, ip, zmq_port, ...: instance id
 * kvc_instance_id(name), dp_size default_dp_size when absent), into a
 * kvc_pod with source KVC_SOURCE_HTTP that kvc_pod_check() accepts (free it
 * with kvc_pod_fini). Errors: 400 KVI_EPROTO not JSON, KVI_EINVAL wrong
 * type, missing field, both or neither form, KVI_ERANGE a value out of
 * range (a port outside 1..65535, dp_size outside 1..65536, a rank not a
 * u16), or whatever kvc_pod_check() rejects, with its message. */
kvi_err kvc_api_register_parse(const char *body, size_t len,
			       uint32_t default_dp_size, kvc_pod *out,
			       kvc_qerr *err);

/* A POST /unregister request: a named pod, or an instance's ranks. */
typedef struct kvc_api_unregister {
	char *name;           /* the per-pod form; NULL for the instance form */
	uint64_t instance_id; /* given, or kvc_instance_id(name) */
	char *model;          /* the instance form's model_name; else NULL */
	bool has_dp_rank;     /* false: every rank */
	uint16_t dp_rank;
} kvc_api_unregister;

/* kvc_api_unregister_parse parses a POST /unregister body ({"instance_id",
 * "model_name", "dp_rank"?} or {"name", "dp_rank"?}). Errors as
 * kvc_api_register_parse. */
kvi_err kvc_api_unregister_parse(const char *body, size_t len,
				 kvc_api_unregister *out, kvc_qerr *err);

/* kvc_api_unregister_fini frees what u owns; safe on a zeroed value. */
void kvc_api_unregister_fini(kvc_api_unregister *u);

#endif /* KVI_COORDINATOR_API_JSON_H */
