/*
 * api_json_int.h - private to api_json.c (fields, queries, registrations)
 * and api_json_load.c (loading a body, with integer literals beyond int64
 * kept as marked strings): the helpers both use.
 */
#ifndef KVI_COORDINATOR_API_JSON_INT_H
#define KVI_COORDINATOR_API_JSON_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* How much of an offending value an error message quotes. */
#define KVC_VALUE_TEXT 48

bool kvc_api_is_digit(char c);

/* kvc_api_is_big says whether v stands for an integer literal beyond
 * int64 (a string that starts with NUL: see api_json.h). */
bool kvc_api_is_big(const json_t *v);

/* kvc_api_value_text writes v as an error message quotes it: scalars as
 * JSON (ASCII, cut to KVC_VALUE_TEXT), arrays and objects by their type. */
void kvc_api_value_text(const json_t *v, char *buf, size_t size);

#endif /* KVI_COORDINATOR_API_JSON_INT_H */
