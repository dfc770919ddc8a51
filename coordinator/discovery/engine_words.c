/*
 * engine_words.c - a container's command line as words: the exec form
 * (command then args, as Kubernetes runs them) and a shell's -c script,
 * split by the shell's quoting rules as far as finding an engine's flags
 * needs, and which engine a command runs (engine_args_int.h).
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "engine_args_int.h"

void
kvc_ewords_push(kvc_ewords *ws, const char *s, size_t len, bool dyn)
{
	if (ws->n == ws->cap) {
		ws->cap = ws->cap ? ws->cap * 2 : 16;
		ws->w = kvi_reallocarray(ws->w, ws->cap, sizeof(*ws->w));
	}
	ws->w[ws->n].s = kvi_strndup(s, len);
	ws->w[ws->n].dyn = dyn;
	ws->n++;
}

void
kvc_ewords_fini(kvc_ewords *ws)
{
	for (size_t i = 0; i < ws->n; i++) {
		kvi_free(ws->w[i].s);
	}
	kvi_free(ws->w);
	memset(ws, 0, sizeof(*ws));
}

void
kvc_ecmds_fini(kvc_ecmds *cs)
{
	for (size_t i = 0; i < cs->n; i++) {
		kvc_ewords_fini(&cs->c[i]);
	}
	kvi_free(cs->c);
	memset(cs, 0, sizeof(*cs));
}

const char *
kvc_path_base(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash != NULL ? slash + 1 : path;
}

/* ---- the shell's words ---------------------------------------------- */

/* The splitter's state. */
typedef struct sh {
	const char *p; /* the next character */
	kvc_ecmds *out;
	kvc_ewords cur; /* the command being read */
	char *buf;      /* the word being read */
	size_t len, cap;
	bool in_word, dyn;
	bool drop_next; /* the next word is a redirection's target */
	char *why;
	size_t whylen;
} sh;

static void
sh_putc(sh *s, char c)
{
	if (s->len + 1 >= s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->buf = kvi_realloc(s->buf, s->cap);
	}
	s->buf[s->len++] = c;
	s->in_word = true;
}

static bool
sh_fail(sh *s, const char *what)
{
	snprintf(s->why, s->whylen, "the shell script has an unterminated %s",
		 what);
	return false;
}

static void
sh_end_word(sh *s)
{
	if (!s->in_word) {
		return;
	}
	if (s->drop_next) {
		s->drop_next = false;
	} else {
		kvc_ewords_push(&s->cur, s->buf, s->len, s->dyn);
	}
	s->len = 0;
	s->in_word = false;
	s->dyn = false;
}

static void
sh_end_cmd(sh *s)
{
	sh_end_word(s);
	s->drop_next = false;
	if (s->cur.n == 0) {
		return;
	}
	s->out->c =
	    kvi_reallocarray(s->out->c, s->out->n + 1, sizeof(*s->out->c));
	s->out->c[s->out->n++] = s->cur;
	memset(&s->cur, 0, sizeof(s->cur));
}

/* sh_group copies a $( ) or ${ } whole, its inner quotes unread. */
static bool
sh_group(sh *s)
{
	char open = *s->p, close = open == '(' ? ')' : '}';
	int depth = 0;
	do {
		char c = *s->p;
		if (c == '\0') {
			return sh_fail(s, open == '(' ? "$(" : "${");
		}
		depth += c == open ? 1 : c == close ? -1 : 0;
		sh_putc(s, c);
		s->p++;
	} while (depth > 0);
	return true;
}

/* sh_dollar reads a $ and what it expands, if anything. */
static bool
sh_dollar(sh *s)
{
	char n = s->p[1];
	sh_putc(s, '$');
	s->p++;
	if (n == '(' || n == '{') {
		s->dyn = true;
		return sh_group(s);
	}
	if ((n >= 'A' && n <= 'Z') || (n >= 'a' && n <= 'z') ||
	    (n >= '0' && n <= '9') || (n != '\0' && strchr("_@*#?$!-", n))) {
		s->dyn = true; /* its name follows as word characters */
	}
	return true;
}

static bool
sh_backquote(sh *s)
{
	s->dyn = true;
	sh_putc(s, '`');
	for (s->p++; *s->p != '`'; s->p++) {
		if (*s->p == '\0') {
			return sh_fail(s, "backquote");
		}
		if (*s->p == '\\' && s->p[1] != '\0') {
			sh_putc(s, *s->p++);
		}
		sh_putc(s, *s->p);
	}
	sh_putc(s, '`');
	s->p++;
	return true;
}

static bool
sh_squote(sh *s)
{
	const char *end = strchr(s->p + 1, '\'');
	if (end == NULL) {
		return sh_fail(s, "single quote");
	}
	s->in_word = true;
	for (const char *q = s->p + 1; q < end; q++) {
		sh_putc(s, *q);
	}
	s->p = end + 1;
	return true;
}

static bool
sh_dquote(sh *s)
{
	s->in_word = true;
	for (s->p++;;) {
		char c = *s->p;
		if (c == '\0') {
			return sh_fail(s, "double quote");
		}
		if (c == '"') {
			s->p++;
			return true;
		}
		if (c == '\\' && s->p[1] != '\0' &&
		    strchr("$`\"\\\n", s->p[1])) {
			if (s->p[1] != '\n') {
				sh_putc(s, s->p[1]);
			}
			s->p += 2;
		} else if (c == '$') {
			if (!sh_dollar(s)) {
				return false;
			}
		} else if (c == '`') {
			if (!sh_backquote(s)) {
				return false;
			}
		} else {
			sh_putc(s, c);
			s->p++;
		}
	}
}

/* sh_redirect skips a redirection: its operator, the file descriptor
 * number written against it, and its target (the next word). */
static void
sh_redirect(sh *s)
{
	bool fd = s->in_word && s->len > 0 && !s->dyn;
	for (size_t i = 0; fd && i < s->len; i++) {
		fd = s->buf[i] >= '0' && s->buf[i] <= '9';
	}
	if (fd) {
		s->len = 0;
		s->in_word = false;
	} else {
		sh_end_word(s);
	}
	while (*s->p == '<' || *s->p == '>' || *s->p == '&') {
		s->p++;
	}
	if (*s->p == '|') {
		s->p++;
	}
	s->drop_next = true;
}

/* sh_step reads one character or one quoted or expanded part. */
static bool
sh_step(sh *s)
{
	char c = *s->p;
	switch (c) {
	case ' ':
	case '\t':
		s->p++;
		sh_end_word(s);
		return true;
	case '\n':
	case ';':
		s->p++;
		sh_end_cmd(s);
		return true;
	case '&':
		if (s->p[1] == '>') {
			sh_redirect(s);
			return true;
		}
		s->p += s->p[1] == '&' ? 2 : 1;
		sh_end_cmd(s);
		return true;
	case '|':
		s->p += s->p[1] == '|' ? 2 : 1;
		sh_end_cmd(s);
		return true;
	case '<':
	case '>':
		sh_redirect(s);
		return true;
	case '\'':
		return sh_squote(s);
	case '"':
		return sh_dquote(s);
	case '$':
		return sh_dollar(s);
	case '`':
		return sh_backquote(s);
	case '\\':
		s->p++;
		if (*s->p == '\n') {
			s->p++; /* a line continued */
		} else if (*s->p != '\0') {
			sh_putc(s, *s->p++);
		}
		return true;
	case '#':
		if (!s->in_word) {
			while (*s->p != '\0' && *s->p != '\n') {
				s->p++;
			}
			return true;
		}
		break;
	default:
		break;
	}
	sh_putc(s, c);
	s->p++;
	return true;
}

bool
kvc_shell_split(const char *script, kvc_ecmds *out, char *why, size_t whylen)
{
	memset(out, 0, sizeof(*out));
	sh s = {.p = script, .out = out, .why = why, .whylen = whylen};
	bool ok = true;
	while (ok && *s.p != '\0') {
		ok = sh_step(&s);
	}
	if (ok) {
		sh_end_cmd(&s);
	}
	kvc_ewords_fini(&s.cur);
	kvi_free(s.buf);
	if (!ok) {
		kvc_ecmds_fini(out);
	}
	return ok;
}

/* ---- a container's command line ------------------------------------ */

/* A growing string. */
typedef struct ebuf {
	char *p;
	size_t len, cap;
} ebuf;

static void
ebuf_put(ebuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = kvi_realloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* How deep env values that name other env vars are followed. */
#define K8S_EXPAND_DEPTH 8

/* env_value returns the literal value of the container's env var name
 * (len bytes), looked up among env[0..upto), and sets *at to its index;
 * NULL when it is not there or has no literal value (valueFrom, or it may
 * come from envFrom, which the spec does not spell out). */
static const char *
env_value(const json_t *env, size_t upto, const char *name, size_t len,
	  size_t *at)
{
	for (size_t i = upto; i-- > 0;) {
		const json_t *e = json_array_get(env, i);
		const char *n = json_string_value(json_object_get(e, "name"));
		if (n == NULL || strlen(n) != len ||
		    memcmp(n, name, len) != 0) {
			continue;
		}
		*at = i;
		return json_string_value(json_object_get(e, "value"));
	}
	return NULL;
}

/* k8s_expand appends s to b as Kubernetes expands a container's command,
 * args and env values: $(VAR) becomes VAR's value from env[0..upto) and
 * $$ a $. False when a $(VAR) has no literal value to take - what the
 * engine gets is then set when the container starts. */
static bool
k8s_expand(const char *s, const json_t *env, size_t upto, int depth, ebuf *b)
{
	while (*s != '\0') {
		if (s[0] == '$' && s[1] == '$') {
			ebuf_put(b, "$", 1);
			s += 2;
			continue;
		}
		const char *close =
		    s[0] == '$' && s[1] == '(' ? strchr(s, ')') : NULL;
		if (close == NULL) {
			ebuf_put(b, s, 1);
			s++;
			continue;
		}
		size_t at;
		const char *v =
		    env_value(env, upto, s + 2, (size_t)(close - s - 2), &at);
		if (v == NULL || depth >= K8S_EXPAND_DEPTH ||
		    !k8s_expand(v, env, at, depth + 1, b)) {
			return false;
		}
		s = close + 1;
	}
	return true;
}

/* push_array appends the strings of a (command or args; NULL: none),
 * with Kubernetes' $(VAR) expanded from the container's env (env, may be
 * NULL); one that names a var with no literal value is kept as written
 * and marked dyn. False when a is not an array of strings. */
static bool
push_array(kvc_ewords *ws, const json_t *a, const json_t *env)
{
	if (a == NULL || json_is_null(a)) {
		return true;
	}
	if (!json_is_array(a)) {
		return false;
	}
	size_t i;
	const json_t *v;
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v)) {
			return false;
		}
		const char *s = json_string_value(v);
		if (strchr(s, '$') == NULL) {
			kvc_ewords_push(ws, s, strlen(s), false);
			continue;
		}
		ebuf b = {0};
		if (k8s_expand(s, env, json_array_size(env), 0, &b)) {
			kvc_ewords_push(ws, b.p != NULL ? b.p : "", b.len,
					false);
		} else {
			kvc_ewords_push(ws, s, strlen(s), true);
		}
		kvi_free(b.p);
	}
	return true;
}

/* vllm_image says whether image is vLLM's own (vllm/vllm-openai, from any
 * registry, any tag or digest), whose entrypoint is `vllm serve`
 * (docker/Dockerfile in vLLM's repository). */
static bool
vllm_image(const char *image)
{
	static const char repo[] = "vllm/vllm-openai";
	if (image == NULL) {
		return false;
	}
	size_t len = strcspn(image, "@");
	const char *colon = memchr(image, ':', len);
	const char *slash = strrchr(image, '/');
	if (colon != NULL && (slash == NULL || colon > slash)) {
		len = (size_t)(colon - image);
	}
	size_t rl = sizeof(repo) - 1;
	return len >= rl && memcmp(image + len - rl, repo, rl) == 0 &&
	       (len == rl || image[len - rl - 1] == '/');
}

/* shell_script says whether argv runs a shell on a -c script, and where
 * the script is. */
static bool
shell_script(const kvc_ewords *argv, size_t *at)
{
	static const char *const shells[] = {"sh",  "bash", "dash",
					     "ash", "zsh",  "ksh"};
	if (argv->n < 3) {
		return false;
	}
	const char *base = kvc_path_base(argv->w[0].s);
	bool shell = false;
	for (size_t i = 0; i < sizeof(shells) / sizeof(shells[0]); i++) {
		shell = shell || strcmp(base, shells[i]) == 0;
	}
	for (size_t i = 1; shell && i + 1 < argv->n; i++) {
		const char *o = argv->w[i].s;
		if (strcmp(o, "-o") == 0 || strcmp(o, "+o") == 0) {
			i++;
		} else if (o[0] == '-' && o[1] != '-' && strchr(o, 'c')) {
			*at = i + 1;
			return true;
		} else if (o[0] != '-' && o[0] != '+') {
			return false;
		}
	}
	return false;
}

bool
kvc_container_cmds(const json_t *container, kvc_ecmds *out, char *why,
		   size_t whylen)
{
	memset(out, 0, sizeof(*out));
	kvc_ewords argv = {0};
	const json_t *cmd = json_object_get(container, "command");
	if (json_array_size(cmd) == 0) {
		const json_t *image = json_object_get(container, "image");
		if (!vllm_image(json_string_value(image))) {
			snprintf(why, whylen,
				 "it has no command (its image's entrypoint "
				 "runs)");
			return false;
		}
		kvc_ewords_push(&argv, "vllm", 4, false);
		kvc_ewords_push(&argv, "serve", 5, false);
	}
	const json_t *env = json_object_get(container, "env");
	if (!json_is_array(env)) {
		env = NULL;
	}
	if (!push_array(&argv, cmd, env) ||
	    !push_array(&argv, json_object_get(container, "args"), env)) {
		kvc_ewords_fini(&argv);
		snprintf(why, whylen,
			 "its command or args is not an array of strings");
		return false;
	}
	size_t at;
	if (shell_script(&argv, &at)) {
		bool ok = kvc_shell_split(argv.w[at].s, out, why, whylen);
		kvc_ewords_fini(&argv);
		return ok;
	}
	out->c = kvi_calloc(1, sizeof(*out->c));
	out->c[0] = argv;
	out->n = 1;
	return true;
}

/* ---- the engine a command runs ------------------------------------- */

/* is_assign says whether s is a shell's NAME=value. */
static bool
is_assign(const char *s)
{
	size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvw"
			     "xyz0123456789_");
	return n > 0 && s[n] == '=' && !(s[0] >= '0' && s[0] <= '9');
}

/* skip_prefix returns where the command proper starts, past exec, nohup,
 * env and its options and NAME=value words. */
static size_t
skip_prefix(const kvc_ewords *ws)
{
	size_t i = 0;
	while (i < ws->n) {
		const char *s = ws->w[i].s;
		if (strcmp(s, "exec") == 0 || strcmp(s, "nohup") == 0 ||
		    is_assign(s)) {
			i++;
		} else if (strcmp(kvc_path_base(s), "env") == 0) {
			for (i++; i < ws->n && (ws->w[i].s[0] == '-' ||
						is_assign(ws->w[i].s));
			     i++) {
			}
		} else {
			break;
		}
	}
	return i;
}

static bool
is_python(const char *base)
{
	return strncmp(base, "python", 6) == 0 &&
	       base[6 + strspn(base + 6, "0123456789.")] == '\0';
}

static bool
word_is(const kvc_ewords *ws, size_t i, const char *s)
{
	return i < ws->n && strcmp(ws->w[i].s, s) == 0;
}

/* ea_module: the engine a python -m module runs, its arguments from
 * *args. */
static kvc_ea_kind
ea_module(const kvc_ewords *ws, size_t m, size_t *args)
{
	if (word_is(ws, m, "vllm.entrypoints.openai.api_server")) {
		*args = m + 1;
		return KVC_EA_VLLM;
	}
	if (word_is(ws, m, "vllm.entrypoints.cli.main") &&
	    word_is(ws, m + 1, "serve")) {
		*args = m + 2;
		return KVC_EA_VLLM;
	}
	if (word_is(ws, m, "sglang.launch_server")) {
		*args = m + 1;
		return KVC_EA_SGLANG;
	}
	return KVC_EA_NONE;
}

kvc_ea_kind
kvc_engine_find(const kvc_ewords *ws, size_t *args)
{
	size_t i = skip_prefix(ws);
	if (i >= ws->n || ws->w[i].dyn) {
		return KVC_EA_NONE;
	}
	const char *base = kvc_path_base(ws->w[i].s);
	if (word_is(ws, i + 1, "serve") &&
	    (strcmp(base, "vllm") == 0 || strcmp(base, "sglang") == 0)) {
		*args = i + 2;
		return base[0] == 'v' ? KVC_EA_VLLM : KVC_EA_SGLANG;
	}
	if (!is_python(base)) {
		return KVC_EA_NONE;
	}
	size_t j = i + 1;
	while (j < ws->n && ws->w[j].s[0] == '-' && !word_is(ws, j, "-m")) {
		j += word_is(ws, j, "-W") || word_is(ws, j, "-X") ? 2 : 1;
	}
	return word_is(ws, j, "-m") ? ea_module(ws, j + 1, args) : KVC_EA_NONE;
}
