/*
 * api_jread.h - a one-pass reader of a JSON request body, which means by a
 * body exactly what the API has always meant by it.
 *
 * The API's bodies were read with jansson (json_loadb with
 * JSON_REJECT_DUPLICATES), with one exception: an integer beyond int64,
 * which jansson refuses, stood for its exact value, so that a u64 id or
 * hash can use all 64 bits. This reader takes and refuses exactly the
 * bodies jansson took and refused with that exception, in one pass over
 * the bytes, without building a tree:
 *
 *  - the grammar of RFC 8259 with jansson's choices: the top value an
 *    object or an array, nesting up to 2048 values deep (each value one
 *    level, as jansson counts), strings of valid UTF-8 (RFC 3629) without
 *    control characters, escapes that pair their surrogates, no \u0000 in
 *    a string, no key twice in one object (keys compared decoded);
 *  - integers exact: an integer that fits an int64 is KVC_JR_INT, one
 *    beyond it KVC_JR_BIG (its text kept, its magnitude too while it fits
 *    a u64); reals are read as jansson reads them (strtod; one that
 *    overflows a double is refused);
 *  - jansson's message for a body it refused, with the same line, column
 *    and byte: the first error in the body's order, and an integer beyond
 *    int64 reported as jansson reported it ("too big integer") when
 *    something else is wrong after it, as the API always did.
 *
 * One difference, on purpose: jansson drops a NUL byte that directly
 * follows a number or a word (its lexer puts the byte back, then takes it
 * for the end of its buffer), so it took [1\0, 2] for [1, 2]. A NUL is no
 * white space: this reader refuses it where it stands.
 *
 * The tokens and the errors are api_jlex.h's; this is jansson's parser
 * over them: it counts each value one level deeper than its container,
 * and checks a key for NUL and for a duplicate before its colon.
 *
 * The caller drives the reader through the top object, whose members it
 * reads with the readers below, each taking "the value in hand" (the one
 * whose first token the reader just read) whole: kvc_jr_value() any
 * value, kvc_jr_enter() with kvc_jr_member() / kvc_jr_element() the
 * members of an object or the elements of an array one by one. A reader
 * of its own (the token ids: api_tokens.h) can take over an array's
 * elements with kvc_jr_at(), kvc_jr_end_at() and kvc_jr_resume_at().
 * After the first error every call returns false at once; the caller
 * then asks kvc_jr_error() what it was.
 *
 * Values point into the body, which must outlive them. A reader lives in
 * its caller's storage; it allocates only for an object with many keys or
 * keys with escapes, and kvc_jr_fini() frees that. It never touches I/O
 * (a parser never does I/O). One thread at a time.
 */
#ifndef KVI_COORDINATOR_API_JREAD_H
#define KVI_COORDINATOR_API_JREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api_jlex.h"

/* How deep values nest, as jansson counts: the top value is 1. */
#define KVC_JR_DEPTH_MAX 2048
/* How much of a value an error message quotes (kvc_jr_text). */
#define KVC_JR_TEXT_MAX 48

typedef enum kvc_jr_type {
	KVC_JR_NONE = 0, /* no value: a member that is absent */
	KVC_JR_NULL,
	KVC_JR_TRUE,
	KVC_JR_FALSE,
	KVC_JR_INT,  /* an integer that fits an int64 */
	KVC_JR_BIG,  /* an integer beyond int64 */
	KVC_JR_REAL, /* a number with a fraction or an exponent */
	KVC_JR_STRING,
	KVC_JR_ARRAY,
	KVC_JR_OBJECT,
} kvc_jr_type;

/* A value as read. */
typedef struct kvc_jr_val {
	kvc_jr_type type;
	const char *text; /* its text in the body (a string with its quotes;
			   * an array or object: its opening bracket) */
	size_t len;
	bool neg;      /* INT, BIG: it has a '-' */
	bool fits_u64; /* INT, BIG: its magnitude fits a u64, in mag */
	bool escaped;  /* STRING: it has escapes (kvc_jr_string decodes) */
	uint64_t mag;  /* INT, BIG with fits_u64: its magnitude */
} kvc_jr_val;

/* Where the reader is in an object or array (zeroed by kvc_jr_enter). */
typedef struct kvc_jr_iter {
	uint8_t state;
	uint32_t serial; /* the object's number, for its keys */
} kvc_jr_iter;

/* One key of an object, as the reader keeps it for duplicates. */
typedef struct kvc_jr_key {
	uint64_t hash;
	const char *s; /* decoded: in the body, or a copy the reader owns */
	uint32_t len;
	uint32_t serial;
} kvc_jr_key;

typedef struct kvc_jr {
	kvc_jlex lx; /* the token in hand, and the first error */
	unsigned depth;
	uint32_t objects; /* objects entered: the next serial */
	/* the keys of every object so far, open addressing; inline while
	 * few */
	kvc_jr_key *keys;
	size_t n_keys, cap_keys;
	char **copies; /* decoded keys with escapes */
	size_t n_copies, cap_copies;
	kvc_jr_key inline_keys[16];
} kvc_jr;

/* kvc_jr_init makes r ready to read body[0..len). */
void kvc_jr_init(kvc_jr *r, const char *body, size_t len);

/* kvc_jr_fini frees what r allocated; values read stay valid (they point
 * into the body), keys from kvc_jr_member do not. r is not to be read
 * from after it; calling it again does nothing. */
void kvc_jr_fini(kvc_jr *r);

/* kvc_jr_top reads the body's first token: an object's '{' is entered and
 * KVC_JR_OBJECT returned (read its members with kvc_jr_member and it);
 * an array is read whole and KVC_JR_ARRAY returned; KVC_JR_NONE on an
 * error (jansson takes nothing else at the top). */
kvc_jr_type kvc_jr_top(kvc_jr *r, kvc_jr_iter *it);

/* kvc_jr_finish checks that nothing but white space follows the top
 * value. Returns false when it does or an error came before. */
bool kvc_jr_finish(kvc_jr *r);

/* kvc_jr_member reads the next member of the object it iterates: true
 * with its key (decoded, *key valid until the next call; no NUL in it)
 * and its value in hand, which the caller must read whole; false at the
 * object's end or on an error. */
bool kvc_jr_member(kvc_jr *r, kvc_jr_iter *it, const char **key,
		   size_t *key_len);

/* kvc_jr_element reads on to the next element of the array it iterates:
 * true with it in hand, which the caller must read whole; false at the
 * array's end or on an error. */
bool kvc_jr_element(kvc_jr *r, kvc_jr_iter *it);

/* kvc_jr_in_hand returns the type of the value in hand by its first
 * token: KVC_JR_ARRAY or KVC_JR_OBJECT for '[' or '{', the type of a
 * scalar, KVC_JR_NONE when the token is no value (an error to read). */
kvc_jr_type kvc_jr_in_hand(const kvc_jr *r);

/* kvc_jr_enter enters the array or object in hand; false on an error
 * (nested too deep). */
bool kvc_jr_enter(kvc_jr *r, kvc_jr_iter *it);

/* kvc_jr_value reads the value in hand whole into *v (arrays and objects
 * are checked and stepped over, *v giving only their type). */
bool kvc_jr_value(kvc_jr *r, kvc_jr_val *v);

/* kvc_jr_ok says whether r is still reading: no error stopped it. */
bool kvc_jr_ok(const kvc_jr *r);

/* kvc_jr_at returns where the reader stands in the body: just past the
 * token in hand ('[' after kvc_jr_enter). */
const char *kvc_jr_at(const kvc_jr *r);

/* kvc_jr_end_at says that the array just entered (it) held only integers
 * that fit an int64 and white space and commas, read by the caller, and
 * that its ']' ends just before after; the reader goes on from there.
 * Only for an array whose elements are not past the nesting limit. */
void kvc_jr_end_at(kvc_jr *r, kvc_jr_iter *it, const char *after);

/* kvc_jr_resume_at gives the array just entered (it) back to the reader,
 * the caller having read its elements as kvc_jr_end_at says up to at:
 * just past a comma (after_comma) or where its first element starts. */
void kvc_jr_resume_at(kvc_jr *r, kvc_jr_iter *it, const char *at,
		      bool after_comma);

/* kvc_jr_error returns the message of the error that stops r (jansson's
 * words) and where it is (line from 1, column in characters, byte); NULL
 * when there is none. */
const char *kvc_jr_error(const kvc_jr *r, int *line, int *column,
			 int *position);

/* kvc_jr_string returns the decoded value of a string v as a new
 * NUL-terminated copy (kvi_free), its length in *len (NULL: not wanted). */
char *kvc_jr_string(const kvc_jr_val *v, size_t *len);

/* kvc_jr_text writes v as error messages quote a value: a scalar as
 * jansson writes it (ASCII only, cut to KVC_JR_TEXT_MAX bytes and "..."),
 * an integer beyond int64 as its text (cut the same way), an array or
 * object as "an array" or "an object". */
void kvc_jr_text(const kvc_jr_val *v, char *buf, size_t size);

/* kvc_jr_type_name returns "an object", "an array", "a string", "an
 * integer" (KVC_JR_BIG too), "a real", "null" or "a boolean". */
const char *kvc_jr_type_name(kvc_jr_type t);

#endif /* KVI_COORDINATOR_API_JREAD_H */
