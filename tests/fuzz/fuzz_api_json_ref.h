/*
 * fuzz_api_json_ref.h - the API's request bodies read with jansson: the
 * reference fuzz_api_json_equiv.c checks the coordinator's parsers
 * (api_query.h, api_json.h) against. Each function takes what its
 * counterpart takes and returns what it must return: the same error, code
 * and message, or the same values.
 */
#ifndef KVI_TESTS_FUZZ_API_JSON_REF_H
#define KVI_TESTS_FUZZ_API_JSON_REF_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "api_json.h"
#include "qerr.h"
#include "qreq.h"

kvi_err ref_query_parse(const char *body, size_t len, size_t max_tokens,
			kvc_qreq *out, kvc_qerr *err);
kvi_err ref_hash_query_parse(const char *body, size_t len, size_t max_hashes,
			     kvc_qreq *out, kvc_qerr *err);
kvi_err ref_register_parse(const char *body, size_t len,
			   uint32_t default_dp_size, kvc_pod *out,
			   kvc_qerr *err);
kvi_err ref_unregister_parse(const char *body, size_t len,
			     kvc_api_unregister *out, kvc_qerr *err);

#endif /* KVI_TESTS_FUZZ_API_JSON_REF_H */
