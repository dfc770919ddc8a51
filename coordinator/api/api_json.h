/*
 * api_json.h - the /register and /unregister bodies (docs/api.md#registration),
 * and what the parsers of every request body share: reading an object's fields
 * in one pass (api_jread.h), and the API's words for a body that is not JSON
 * and for a field that is missing, of the wrong type or out of range. The
 * /query bodies are api_query.h's.
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
 * 65536 does not fit in u16". A body that is not JSON is "invalid JSON: "
 * and what jansson says of it, with its line, column and byte.
 *
 * u64 numbers. The API (docs/api.md#conventions) sends instance ids and block
 * hashes as JSON numbers, and they use all 64 bits: every integer up to 2^64-1
 * is read exactly, and one beyond is an error that quotes it ("instance_id:
 * 18446744073709551616 is not a u64"). u64 fields also accept a decimal
 * string ("18446744073709551615": digits only, no sign, no leading zero),
 * the form in which responses spell ids. Reals, negative numbers and
 * anything else are rejected, never rounded or truncated.
 *
 * Conventions of every parser: unknown fields are ignored; an optional
 * field that is null counts as absent; a required one that is null is a
 * type error; duplicate keys are rejected (a body must mean one thing);
 * fields are checked in a fixed order, whatever their order in the body,
 * and only once the whole body has been read. Out values are written only
 * on success and then own their memory (free with the matching _fini); on
 * failure nothing is left to free but err->extra (kvc_qerr_fini).
 */
#ifndef KVI_COORDINATOR_API_JSON_H
#define KVI_COORDINATOR_API_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api_jread.h"
#include "error.h"
#include "pod.h"
#include "qerr.h"
#include "qreq.h"

/* ---- bodies and fields ----------------------------------------------------
 */

/* kvc_api_body_error fills err for a body that r could not read whole
 * (400 KVI_EPROTO "invalid JSON: ... at line L, column C (byte B)") or
 * whose top value, top, is not an object (400 KVI_EINVAL "the body must
 * be a JSON object, not an array"), and returns the error. */
kvi_err kvc_api_body_error(const kvc_jr *r, kvc_jr_type top, kvc_qerr *err);

/*
 * Field readers, for a field's value v as read (type KVC_JR_NONE when the
 * body lacks the field). Each returns KVI_OK and writes *out when the
 * field holds a valid value. `present` NULL makes the field required:
 * absent is a 400 "<field> is missing". Otherwise *present says whether it
 * was there (absent or null: false, *out untouched). A wrong type is a 400
 * KVI_EINVAL, a value out of range a 400 KVI_ERANGE; both messages quote
 * the value (kvc_jr_text).
 */

/* kvc_api_get_u64 reads a u64 given as a JSON integer (any value up to
 * 2^64-1, exactly) or as a decimal string. */
kvi_err kvc_api_get_u64(const kvc_jr_val *v, const char *field, uint64_t *out,
			bool *present, kvc_qerr *err);

/* kvc_api_get_u16 reads an integer that must fit in a u16 ("dp_rank 65536
 * does not fit in u16"). */
kvi_err kvc_api_get_u16(const kvc_jr_val *v, const char *field, uint16_t *out,
			bool *present, kvc_qerr *err);

/* kvc_api_get_u32 reads an integer in min..max ("dp_size 0 is not in
 * 1..65536"). */
kvi_err kvc_api_get_u32(const kvc_jr_val *v, const char *field, uint32_t min,
			uint32_t max, uint32_t *out, bool *present,
			kvc_qerr *err);

/* kvc_api_get_string reads a string; *out is a new copy (kvi_free). */
kvi_err kvc_api_get_string(const kvc_jr_val *v, const char *field, char **out,
			   bool *present, kvc_qerr *err);

/* kvc_api_get_bool reads an optional boolean ("pending must be a
 * boolean, got 1"); absent or null leave *out as it is. */
kvi_err kvc_api_get_bool(const kvc_jr_val *v, const char *field, bool *out,
			 kvc_qerr *err);

/* kvc_api_routed_rank checks how a /routed request names the rank it went
 * to, once its fields are read: a pod that is not empty, or an instance
 * id, exactly one of them (400 otherwise). */
kvi_err kvc_api_routed_rank(const kvc_qreq *q, kvc_qerr *err);

/* kvc_api_get_name reads a required string that is not empty ("model_name
 * is empty"). */
kvi_err kvc_api_get_name(const kvc_jr_val *v, const char *field, char **out,
			 kvc_qerr *err);

/* kvc_api_type_error is the 400 KVI_EINVAL "<field> must be <want>, got
 * <v>". */
kvi_err kvc_api_type_error(const kvc_jr_val *v, const char *field,
			   const char *want, kvc_qerr *err);

/* kvc_api_uint_of reads a non-negative integer (-0 is 0) up to 2^64-1
 * into *out; false for anything else. */
bool kvc_api_uint_of(const kvc_jr_val *v, uint64_t *out);

/* kvc_api_u64_of reads a u64 as kvc_api_get_u64 takes it; false for
 * anything else. */
bool kvc_api_u64_of(const kvc_jr_val *v, uint64_t *out);

/* kvc_api_value_u64 reads one u64 value (an array element); `what` names
 * it in the message ("block_hashes[3]: -1 is not a u64"). */
kvi_err kvc_api_value_u64(const kvc_jr_val *v, const char *what, uint64_t *out,
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
