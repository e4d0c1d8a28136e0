// Internals of the Jinja interpreter shared by its files: the arena, values,
// the syntax tree and the render state. Not a public interface.
#ifndef INFER_INFERENCE_JINJA_IMPL_H
#define INFER_INFERENCE_JINJA_IMPL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

// ---- limits ---------------------------------------------------------------

#define J_MAX_TEMPLATE (4u << 20)   // bytes of template source
#define J_MAX_DEPTH 200             // syntax nesting (parser recursion)
#define J_MAX_CALLS 64              // nested macro calls
#define J_MAX_EVAL_DEPTH 1000       // nested eval/exec frames (all macro calls together)
#define J_MAX_ITERS 200000          // loop iterations over one render
#define J_MAX_OUTPUT (16u << 20)    // bytes of rendered text
#define J_MAX_ARENA (256u << 20)    // bytes of working memory for one render

// ---- arena: every allocation of one render lives here ---------------------

typedef struct jblock jblock;
typedef struct {
    jblock *head;
    size_t total;   // bytes allocated so far, checked against J_MAX_ARENA
} jarena;

// ---- values ---------------------------------------------------------------

typedef enum {
    V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_MACRO, V_FUNC, V_LOOP,
} vtype;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jloop jloop;
typedef struct node node;

typedef struct value {
    vtype t;
    unsigned char safe;     // V_STR: a Markup string (from |safe or |e): `+` escapes the other side
    union {
        int b;              // V_BOOL
        int64_t i;          // V_INT
        double f;           // V_FLOAT
        struct { const char *p; size_t n; } s;  // V_STR: UTF-8, not NUL-terminated
        jlist *l;           // V_LIST (also tuples)
        jdict *d;           // V_DICT (also namespace() and loop)
        const node *m;      // V_MACRO: the macro statement
        int fn;             // V_FUNC: a global function id
        jloop *lp;          // V_LOOP: the `loop` variable of a for loop
    };
    const char *name;       // V_UNDEF: what was looked up (for messages), may be NULL
} value;

struct jlist { value *v; int n, cap; int is_tuple; };   // tuples print as (a, b)
// `loop` inside a for body: index0 of length items
struct jloop { int64_t index0, length; const jlist *items; };
struct jdict {
    value *k, *v;
    int n, cap;
    int is_ns;              // a namespace(): attributes are assignable
};

enum { FN_RANGE = 1, FN_NAMESPACE, FN_DICT, FN_RAISE, FN_STRFTIME, FN_CYCLE_UNUSED };

// ---- syntax tree ----------------------------------------------------------

typedef enum {
    // expressions
    E_LIT, E_NAME, E_LIST, E_TUPLE, E_DICT, E_ATTR, E_INDEX, E_SLICE, E_CALL,
    E_FILTER, E_TEST, E_NEG, E_POS, E_NOT, E_AND, E_OR, E_BIN, E_CMP, E_COND,
    // statements
    S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_BREAK, S_CONTINUE,
    S_BLOCK,
} nkind;

typedef struct { node **v; int n, cap; } nlist;

// Binary and comparison operators (node.op).
enum {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
};

struct node {
    nkind kind;
    int pos;            // byte offset in the template, for messages
    int op;             // E_BIN/E_CMP operator; E_TEST: 1 when negated
    const char *s;      // E_NAME/E_ATTR/E_FILTER/E_TEST/S_MACRO/S_SET name (NUL-terminated)
    value lit;          // E_LIT, S_TEXT (a string)
    node *a, *b, *c;    // operands: E_COND a if b else c; E_SLICE a[b:c:d]; S_FOR a=iter b=cond
    node *d;
    nlist args;         // call/filter/test args; list/dict/tuple items (dict: k,v,k,v);
                        // S_IF: conditions; S_FOR/S_SET: targets; S_MACRO: parameters
    nlist kwargs;       // keyword arguments (E_LIT-less: kwnames holds names); S_MACRO defaults
    const char **kwnames;
    int *ops;           // E_CMP: the operators of a chain a < b <= c (args: the operands)
    nlist body;         // statement body; S_IF: one S_BLOCK per condition (+ else)
    nlist orelse;       // S_FOR else, S_IF else
};

// ---- render state ---------------------------------------------------------

typedef struct scope scope;
struct scope { jdict vars; scope *parent; };

typedef struct { char *p; size_t n, cap; } jbuf;

typedef struct jstate {
    jarena arena;
    jmp_buf fail;           // every error longjmps here after setting msg
    char msg[512];
    int status;             // infer_status of the error
    const char *src;        // template source (normalized), for line:col
    size_t src_n;
    jbuf *out;              // where text goes now
    scope *globals;         // the template's top-level variables
    scope *cur;             // where `set` writes now
    int depth, calls;       // parser nesting; macro calls in progress
    int edepth;             // eval/exec nesting
    long iters;
    long long now;
} jstate;

// ---- jinja_value.c --------------------------------------------------------

void *jalloc(jstate *J, size_t n);
void jarena_free(jarena *a);
char *jstrdup(jstate *J, const char *p, size_t n);
_Noreturn void jerr(jstate *J, int pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
_Noreturn void jraise(jstate *J, int pos, const char *msg, size_t n);

value v_undef(const char *name);
value v_none(void);
value v_bool(int b);
value v_int(int64_t i);
value v_float(double f);
value v_str(const char *p, size_t n);
value v_cstr(const char *p);
value v_list(jstate *J);
value v_dict(jstate *J);
void list_push(jstate *J, jlist *l, value v);
value *dict_get(const jdict *d, const char *k, size_t n);
value *dict_getv(const jdict *d, value k);
void dict_set(jstate *J, jdict *d, value k, value v);
void dict_setc(jstate *J, jdict *d, const char *k, value v);

int v_truthy(value v);
int v_equal(value a, value b);
int v_compare(jstate *J, int pos, value a, value b);   // <0, 0, >0
const char *v_typename(value v);

void buf_put(jstate *J, jbuf *b, const char *p, size_t n);
void buf_putc(jstate *J, jbuf *b, char c);
void v_write_str(jstate *J, jbuf *b, value v);   // str(v)
void v_write_repr(jstate *J, jbuf *b, value v);  // repr(v)
value v_tostr(jstate *J, value v);
void v_write_json(jstate *J, jbuf *b, value v, int pos, int indent, const char *isep,
                  const char *ksep, int sort_keys, int ensure_ascii, int level);
value v_from_json(jstate *J, const cJSON *j);

// UTF-8 helpers: code point count, byte offset of code point i.
size_t u8_len(const char *p, size_t n);
size_t u8_offset(const char *p, size_t n, size_t i);
int u8_isspace_at(const char *p, size_t n, size_t *len);  // is there a space char at p? its length

// ---- jinja_lex.c ----------------------------------------------------------

typedef enum {
    T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END,
    T_NAME, T_STR, T_INT, T_FLOAT, T_OP, T_EOF,
} ttype;

typedef struct {
    ttype t;
    int pos;
    const char *s;   // T_TEXT/T_NAME/T_STR/T_OP text (NUL-terminated copy)
    size_t n;
    int64_t i;
    double f;
} token;

typedef struct {   // the parser's state: the tokens jlex fills, the next one's index
    jstate *J;
    token *tok;
    int n, cap, at;
} parser;

// Splits J's source into P's tokens, the last T_EOF.
void jlex(parser *P);
void pos_linecol(const jstate *J, int pos, int *line, int *col);

// ---- jinja_parse.c --------------------------------------------------------

// Parses the (already normalized) source into a statement list.
nlist jparse(jstate *J);
void nlist_push(jstate *J, nlist *l, node *n);

// ---- jinja_eval.c ---------------------------------------------------------

value eval(jstate *J, const node *e);
int exec_list(jstate *J, const nlist *body);        // 0 normal, 1 break, 2 continue
value call_macro(jstate *J, const node *call, value m, value *args, int nargs,
                 const char **kwn, value *kwv, int nkw);
value v_getattr(jstate *J, int pos, value obj, const char *name, size_t n);
value v_getitem(jstate *J, int pos, value obj, value key);
value v_iterate(jstate *J, int pos, value v);         // a list of the items of v

// ---- jinja_builtins.c -----------------------------------------------------

value apply_filter(jstate *J, const node *f, value x, value *args, int nargs,
                   const char **kwn, value *kwv, int nkw);
int apply_test(jstate *J, const node *t, value x, value *args, int nargs);
value call_method(jstate *J, int pos, value obj, const char *name, value *args, int nargs,
                  const char **kwn, value *kwv, int nkw);
value call_global(jstate *J, int pos, int fn, value *args, int nargs,
                  const char **kwn, value *kwv, int nkw);
int global_lookup(const char *name);   // FN_* or 0
int jinja_builtin_known(const char *name, int is_filter);
value html_escape(jstate *J, value s);   // markupsafe.escape: & < > " ' as entities; Markup in and out

#endif
