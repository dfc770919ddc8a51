/*
 * engine_args_int.h - the words of a container's command line, shared by
 * engine_words.c (which makes them: the exec form and the shell's -c
 * script, and finds the engine a command runs) and engine_args.c (which
 * reads the engine's flags from them).
 *
 * A word keeps its text as written after quote removal, with any
 * expansion left as it stands ("$DP", "$(VAR)"), and says whether part of
 * it is only known when the container starts: a shell expansion outside
 * single quotes, or Kubernetes' $(VAR) in a command or args.
 */
#ifndef KVI_COORDINATOR_ENGINE_ARGS_INT_H
#define KVI_COORDINATOR_ENGINE_ARGS_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "engine_args.h"

typedef struct kvc_ew {
	char *s;
	bool dyn; /* part of it is expanded when the container starts */
} kvc_ew;

/* One command: its words. */
typedef struct kvc_ewords {
	kvc_ew *w;
	size_t n, cap;
} kvc_ewords;

/* The commands of a container: one for the exec form, those of its
 * script for a shell's -c. */
typedef struct kvc_ecmds {
	kvc_ewords *c;
	size_t n;
} kvc_ecmds;

void kvc_ewords_push(kvc_ewords *ws, const char *s, size_t len, bool dyn);
void kvc_ewords_fini(kvc_ewords *ws);
void kvc_ecmds_fini(kvc_ecmds *cs);

/* kvc_path_base returns the last part of a path ("python3" of
 * "/usr/bin/python3"). */
const char *kvc_path_base(const char *path);

/* kvc_shell_split splits a shell script into its simple commands (words
 * of each; empty commands dropped). False with why set when it cannot:
 * an unterminated quote, $( or backquote. */
bool kvc_shell_split(const char *script, kvc_ecmds *out, char *why,
		     size_t whylen);

/* kvc_container_cmds reads a container object's command line into its
 * commands: the exec form as one command, a shell's -c script split.
 * False with why set when there is none to read (no command and an image
 * whose entrypoint is not known, command or args not arrays of strings,
 * a script that does not split). */
bool kvc_container_cmds(const json_t *container, kvc_ecmds *out, char *why,
			size_t whylen);

/* kvc_engine_find returns the engine the command ws runs (past exec,
 * nohup, env and NAME=value words: vllm serve, sglang serve, python -m
 * and the module of either), with *args the index of its first argument;
 * KVC_EA_NONE when it runs none. */
kvc_ea_kind kvc_engine_find(const kvc_ewords *ws, size_t *args);

#endif /* KVI_COORDINATOR_ENGINE_ARGS_INT_H */
