/*
 * fuzz_api_json_ref_int.h - what the reference's two files share:
 * fuzz_api_json_ref.c reads a body with jansson and its fields and
 * values; fuzz_api_json_ref_bodies.c reads each request body with them.
 */
#ifndef KVI_TESTS_FUZZ_API_JSON_REF_INT_H
#define KVI_TESTS_FUZZ_API_JSON_REF_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "fuzz_api_json_ref.h"

/* Room for a value's text in a message. */
#define REF_VALUE_TEXT 48

bool ref_is_big(const json_t *v);
void ref_value_text(const json_t *v, char *buf, size_t size);
kvi_err ref_json_load(const char *body, size_t len, json_t **out,
		      kvc_qerr *err);
bool ref_uint_of(const json_t *v, uint64_t *out);
bool ref_is_int(const json_t *v);
kvi_err ref_get_u64(const json_t *obj, const char *field, uint64_t *out,
		    bool *present, kvc_qerr *err);
kvi_err ref_get_u16(const json_t *obj, const char *field, uint16_t *out,
		    bool *present, kvc_qerr *err);
kvi_err ref_get_u32(const json_t *obj, const char *field, uint32_t min,
		    uint32_t max, uint32_t *out, bool *present, kvc_qerr *err);
kvi_err ref_get_string(const json_t *obj, const char *field, char **out,
		       bool *present, kvc_qerr *err);
kvi_err ref_get_bool(const json_t *obj, const char *field, bool *out,
		     kvc_qerr *err);
kvi_err ref_get_name(const json_t *obj, const char *field, char **out,
		     kvc_qerr *err);
kvi_err ref_get_array(const json_t *obj, const char *field, size_t max,
		      const char *unit, const json_t **a, bool *present,
		      kvc_qerr *err);
kvi_err ref_get_u64_array(const json_t *obj, const char *field, size_t max,
			  const char *unit, uint64_t **out, size_t *n,
			  bool *present, kvc_qerr *err);

#endif /* KVI_TESTS_FUZZ_API_JSON_REF_INT_H */
