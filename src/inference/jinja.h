// A Jinja2 subset interpreter for chat templates. It renders the way
// transformers' apply_chat_template does: ImmutableSandboxedEnvironment with
// trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, the
// loopcontrols extension, raise_exception(), strftime_now() and a tojson that
// is json.dumps(ensure_ascii=False).
//
// Supported: {{ }}, {% %}, {# #} with -/+ whitespace control; if/elif/else,
// for (tuple targets, `if` filter, else, loop.*), set (names, tuples,
// namespace attributes, block set), macro, break/continue, generation, raw;
// literals, list/dict/tuple literals, attribute/subscript/slice, calls with
// keyword arguments, filters, tests, the usual operators. Everything else
// (include, extends, import, call blocks, filter blocks) is a clear error.
//
// Known differences from jinja2: upper/lower/title/capitalize map ASCII letters
// only; filters that jinja2 implements as lazy generators (items, map,
// select...) are evaluated eagerly, so a misuse jinja2 would only report when
// iterated fails here at once; JSON numbers that are integral (1.0) read as
// ints; str % args, recursive loop calls, call/filter blocks, include/import/
// extends are not supported (a clear error).
//
// Bounds (hostile templates): template size, nesting depth, macro call depth,
// total loop iterations, output size and total memory are all capped; past a
// cap rendering stops with an error naming it.
#ifndef INFER_INFERENCE_JINJA_H
#define INFER_INFERENCE_JINJA_H

#include <cjson/cJSON.h>

#include "infer.h"

// Renders `tmpl` with the variables of the JSON object `vars` (each member
// becomes a template variable; JSON null is None). `now` is the time, in unix
// seconds, that strftime_now() formats (UTC); pass -1 for the current local
// time. On success *out is a malloc'd NUL-terminated string. On failure the
// message (infer_last_error) names the construct and its line:column, or
// carries the text given to raise_exception().
infer_status jinja_render(const char *tmpl, const cJSON *vars, long long now, char **out);

#endif
