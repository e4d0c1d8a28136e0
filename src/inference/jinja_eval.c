// Jinja evaluator: expressions to values, statements to text. Scoping follows
// jinja2: each for-loop iteration and each macro call gets its own scope, if
// blocks do not; namespace() objects carry state out of loops.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "inference/jinja_impl.h"

// ============================================================================
// variables
// ============================================================================

static value lookup(jstate *J, const char *name) {
    size_t n = strlen(name);
    for (scope *s = J->cur; s; s = s->parent) {
        value *v = dict_get(&s->vars, name, n);
        if (v) return *v;
    }
    int fn = global_lookup(name);
    if (fn) return (value){.t = V_FUNC, .fn = fn};
    return v_undef(name);
}

static void assign(jstate *J, const node *t, value v) {
    if (t->kind == E_NAME) {
        dict_setc(J, &J->cur->vars, t->s, v);
        return;
    }
    // ns.attr = v
    value obj = eval(J, t->a);
    if (obj.t != V_DICT || !obj.d->is_ns)
        jerr(J, t->pos, "cannot assign attribute '%s' on %s (only on namespace objects)", t->s, v_typename(obj));
    dict_setc(J, obj.d, t->s, v);
}

static void assign_targets(jstate *J, const nlist *targets, value v, int pos) {
    if (targets->n == 1) { assign(J, targets->v[0], v); return; }
    value items = v_iterate(J, pos, v);
    if (items.l->n != targets->n)
        jerr(J, pos, "cannot unpack %d values into %d names", items.l->n, targets->n);
    for (int i = 0; i < targets->n; i++) assign(J, targets->v[i], items.l->v[i]);
}

// ============================================================================
// attribute and item access
// ============================================================================

static _Noreturn void undefined_err(jstate *J, int pos, value u) {
    if (u.name) jerr(J, pos, "'%s' is undefined", u.name);
    jerr(J, pos, "use of an undefined value");
}

value v_getattr(jstate *J, int pos, value obj, const char *name, size_t n) {
    if (obj.t == V_UNDEF) undefined_err(J, pos, obj);
    if (obj.t == V_DICT) {
        value *v = dict_get(obj.d, name, n);
        if (v) return *v;
    }
    if (obj.t == V_LOOP) {
        const jloop *L = obj.lp;
        char nm[16];
        snprintf(nm, sizeof nm, "%.*s", (int)(n < 15 ? n : 15), name);
        if (!strcmp(nm, "index")) return v_int(L->index0 + 1);
        if (!strcmp(nm, "index0")) return v_int(L->index0);
        if (!strcmp(nm, "revindex")) return v_int(L->length - L->index0);
        if (!strcmp(nm, "revindex0")) return v_int(L->length - L->index0 - 1);
        if (!strcmp(nm, "first")) return v_bool(L->index0 == 0);
        if (!strcmp(nm, "last")) return v_bool(L->index0 == L->length - 1);
        if (!strcmp(nm, "length")) return v_int(L->length);
        if (!strcmp(nm, "depth")) return v_int(1);
        if (!strcmp(nm, "depth0")) return v_int(0);
        if (!strcmp(nm, "previtem"))
            return L->index0 > 0 ? L->items->v[L->index0 - 1] : v_undef("previtem");
        if (!strcmp(nm, "nextitem"))
            return L->index0 + 1 < L->length ? L->items->v[L->index0 + 1] : v_undef("nextitem");
    }
    return v_undef(jstrdup(J, name, n));
}

static int64_t norm_index(int64_t i, int64_t len) { return i < 0 ? i + len : i; }

value v_getitem(jstate *J, int pos, value obj, value key) {
    if (obj.t == V_UNDEF) undefined_err(J, pos, obj);
    if (obj.t == V_DICT) {
        value *v = dict_getv(obj.d, key);
        if (v) return *v;
        return v_undef(key.t == V_STR ? jstrdup(J, key.s.p, key.s.n) : NULL);
    }
    int intkey = key.t == V_INT || key.t == V_BOOL;
    int64_t k = key.t == V_INT ? key.i : key.b;
    if (obj.t == V_LIST && intkey) {
        int64_t i = norm_index(k, obj.l->n);
        if (i < 0 || i >= obj.l->n) return v_undef(NULL);
        return obj.l->v[i];
    }
    if (obj.t == V_STR && intkey) {
        int64_t len = (int64_t)u8_len(obj.s.p, obj.s.n);
        int64_t i = norm_index(k, len);
        if (i < 0 || i >= len) return v_undef(NULL);
        size_t a = u8_offset(obj.s.p, obj.s.n, (size_t)i), b = u8_offset(obj.s.p, obj.s.n, (size_t)i + 1);
        return v_str(obj.s.p + a, b - a);
    }
    if (key.t == V_STR) return v_getattr(J, pos, obj, key.s.p, key.s.n);
    return v_undef(NULL);
}

// Python slice semantics on a sequence of `len` items.
static value slice(jstate *J, const node *e, value obj) {
    value vs[3] = {v_none(), v_none(), v_none()};
    const node *parts[3] = {e->b, e->c, e->d};
    for (int i = 0; i < 3; i++) {
        if (!parts[i]) continue;
        vs[i] = eval(J, parts[i]);
        if (vs[i].t != V_INT && vs[i].t != V_NONE && vs[i].t != V_BOOL)
            jerr(J, e->pos, "slice indices must be integers or None");
        if (vs[i].t == V_BOOL) vs[i] = v_int(vs[i].b);
    }
    if (obj.t == V_UNDEF) undefined_err(J, e->pos, obj);
    int64_t len;
    if (obj.t == V_LIST) len = obj.l->n;
    else if (obj.t == V_STR) len = (int64_t)u8_len(obj.s.p, obj.s.n);
    else jerr(J, e->pos, "'%s' object is not subscriptable with a slice", v_typename(obj));
    int64_t step = vs[2].t == V_INT ? vs[2].i : 1;
    if (step == 0) jerr(J, e->pos, "slice step cannot be zero");
    int64_t lo, hi;
    if (step > 0) {
        lo = vs[0].t == V_INT ? norm_index(vs[0].i, len) : 0;
        hi = vs[1].t == V_INT ? norm_index(vs[1].i, len) : len;
        if (lo < 0) lo = 0;
        if (lo > len) lo = len;
        if (hi < 0) hi = 0;
        if (hi > len) hi = len;
    } else {
        lo = vs[0].t == V_INT ? norm_index(vs[0].i, len) : len - 1;
        hi = vs[1].t == V_INT ? norm_index(vs[1].i, len) : -1;
        if (lo < -1) lo = -1;
        if (lo >= len) lo = len - 1;
        if (hi < -1) hi = -1;
        if (hi >= len) hi = len - 1;
    }
    if (obj.t == V_LIST) {
        value r = v_list(J);
        for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) list_push(J, r.l, obj.l->v[i]);
        return r;
    }
    // strings: ASCII fast path, else by code point offsets
    int ascii = 1;
    for (size_t i = 0; i < obj.s.n; i++)
        if ((unsigned char)obj.s.p[i] >= 0x80) { ascii = 0; break; }
    if (step == 1) {
        if (hi <= lo) return v_str("", 0);
        size_t a = ascii ? (size_t)lo : u8_offset(obj.s.p, obj.s.n, (size_t)lo);
        size_t b = ascii ? (size_t)hi : u8_offset(obj.s.p, obj.s.n, (size_t)hi);
        return v_str(obj.s.p + a, b - a);
    }
    size_t *off = jalloc(J, ((size_t)len + 1) * sizeof *off);
    for (int64_t i = 0; i <= len; i++)
        off[i] = ascii ? (size_t)i : u8_offset(obj.s.p, obj.s.n, (size_t)i);
    jbuf b = {0};
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
        buf_put(J, &b, obj.s.p + off[i], off[i + 1] - off[i]);
    return v_str(b.p ? b.p : "", b.n);
}

value v_iterate(jstate *J, int pos, value v) {
    value r;
    switch (v.t) {
    case V_LIST: return v;
    case V_UNDEF: return v_list(J);
    case V_DICT:
        r = v_list(J);
        for (int i = 0; i < v.d->n; i++) list_push(J, r.l, v.d->k[i]);
        return r;
    case V_STR:
        r = v_list(J);
        for (size_t i = 0; i < v.s.n;) {
            size_t k = i + 1;
            while (k < v.s.n && ((unsigned char)v.s.p[k] & 0xc0) == 0x80) k++;
            list_push(J, r.l, v_str(v.s.p + i, k - i));
            i = k;
        }
        return r;
    default:
        jerr(J, pos, "'%s' object is not iterable", v_typename(v));
    }
}

// ============================================================================
// operators
// ============================================================================

static int is_intlike(value v) { return v.t == V_INT || v.t == V_BOOL; }
static int64_t ival(value v) { return v.t == V_INT ? v.i : v.b; }
static int is_numv(value v) { return is_intlike(v) || v.t == V_FLOAT; }
static double fval(value v) { return v.t == V_FLOAT ? v.f : (double)ival(v); }

static value repeat(jstate *J, int pos, value s, int64_t k) {
    if (k <= 0) return s.t == V_STR ? v_str("", 0) : v_list(J);
    if (s.t == V_STR) {
        if (s.s.n && (uint64_t)k > J_MAX_OUTPUT / s.s.n) jerr(J, pos, "string repetition too large");
        jbuf b = {0};
        for (int64_t i = 0; i < k; i++) buf_put(J, &b, s.s.p, s.s.n);
        return v_str(b.p ? b.p : "", b.n);
    }
    if (s.l->n && (uint64_t)k > 1000000 / (uint64_t)s.l->n) jerr(J, pos, "list repetition too large");
    value r = v_list(J);
    for (int64_t i = 0; i < k; i++)
        for (int j = 0; j < s.l->n; j++) list_push(J, r.l, s.l->v[j]);
    return r;
}

static const char *opname(int op) {
    static const char *names[] = {"", "+", "-", "*", "/", "//", "%", "**", "~"};
    return op >= 1 && op <= OP_CONCAT ? names[op] : "?";
}

static value binop(jstate *J, const node *e, value a, value b) {
    int op = e->op;
    if (op == OP_CONCAT) {
        jbuf buf = {0};
        v_write_str(J, &buf, a);
        v_write_str(J, &buf, b);
        return v_str(buf.p ? buf.p : "", buf.n);
    }
    if (a.t == V_UNDEF) undefined_err(J, e->pos, a);
    if (b.t == V_UNDEF) undefined_err(J, e->pos, b);
    if (is_intlike(a) && is_intlike(b)) {
        int64_t x = ival(a), y = ival(b), r;
        switch (op) {
        case OP_ADD: if (__builtin_add_overflow(x, y, &r)) goto overflow; return v_int(r);
        case OP_SUB: if (__builtin_sub_overflow(x, y, &r)) goto overflow; return v_int(r);
        case OP_MUL: if (__builtin_mul_overflow(x, y, &r)) goto overflow; return v_int(r);
        case OP_DIV: if (!y) goto divzero; return v_float((double)x / (double)y);
        case OP_FLOORDIV:
        case OP_MOD: {
            if (!y) goto divzero;
            if (x == INT64_MIN && y == -1) goto overflow;
            int64_t q = x / y, m = x % y;
            if (m && ((m < 0) != (y < 0))) { q--; m += y; }
            return v_int(op == OP_MOD ? m : q);
        }
        case OP_POW: {
            if (y < 0) return v_float(pow((double)x, (double)y));
            int64_t acc = 1;
            for (int64_t i = 0; i < y; i++) {
                if (__builtin_mul_overflow(acc, x, &acc)) goto overflow;
                if (acc == 0 || acc == 1) break;
            }
            return v_int(acc);
        }
        }
    }
    if (is_numv(a) && is_numv(b)) {
        double x = fval(a), y = fval(b);
        switch (op) {
        case OP_ADD: return v_float(x + y);
        case OP_SUB: return v_float(x - y);
        case OP_MUL: return v_float(x * y);
        case OP_DIV: if (y == 0) goto divzero; return v_float(x / y);
        case OP_FLOORDIV: if (y == 0) goto divzero; return v_float(floor(x / y));
        case OP_MOD: {
            if (y == 0) goto divzero;
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            return v_float(m);
        }
        case OP_POW: return v_float(pow(x, y));
        }
    }
    if (op == OP_ADD && a.t == V_STR && b.t == V_STR) {
        // Markup + str escapes the str (markupsafe), and the result is Markup
        if (a.safe != b.safe) {
            if (!a.safe) a = html_escape(J, a);
            else b = html_escape(J, b);
        }
        jbuf buf = {0};
        buf_put(J, &buf, a.s.p, a.s.n);
        buf_put(J, &buf, b.s.p, b.s.n);
        value r = v_str(buf.p ? buf.p : "", buf.n);
        r.safe = a.safe || b.safe;
        return r;
    }
    if (op == OP_ADD && a.t == V_LIST && b.t == V_LIST) {
        value r = v_list(J);
        for (int i = 0; i < a.l->n; i++) list_push(J, r.l, a.l->v[i]);
        for (int i = 0; i < b.l->n; i++) list_push(J, r.l, b.l->v[i]);
        return r;
    }
    if (op == OP_MUL && (a.t == V_STR || a.t == V_LIST) && is_intlike(b)) return repeat(J, e->pos, a, ival(b));
    if (op == OP_MUL && (b.t == V_STR || b.t == V_LIST) && is_intlike(a)) return repeat(J, e->pos, b, ival(a));
    jerr(J, e->pos, "unsupported operand types for %s: '%s' and '%s'", opname(op), v_typename(a), v_typename(b));
overflow:
    jerr(J, e->pos, "integer overflow in '%s'", opname(op));
divzero:
    jerr(J, e->pos, "division by zero");
}

static int contains(jstate *J, int pos, value hay, value needle) {
    switch (hay.t) {
    case V_STR:
        if (needle.t != V_STR) jerr(J, pos, "'in <string>' requires string as left operand, not %s", v_typename(needle));
        if (!needle.s.n) return 1;
        if (needle.s.n > hay.s.n) return 0;
        return memmem(hay.s.p, hay.s.n, needle.s.p, needle.s.n) != NULL;
    case V_LIST:
        for (int i = 0; i < hay.l->n; i++)
            if (v_equal(hay.l->v[i], needle)) return 1;
        return 0;
    case V_DICT: return dict_getv(hay.d, needle) != NULL;
    case V_UNDEF: return 0;
    default: jerr(J, pos, "argument of type '%s' is not iterable", v_typename(hay));
    }
}

static int compare1(jstate *J, int pos, int op, value a, value b) {
    switch (op) {
    case OP_EQ: return v_equal(a, b);
    case OP_NE: return !v_equal(a, b);
    case OP_IN: return contains(J, pos, b, a);
    case OP_NOTIN: return !contains(J, pos, b, a);
    }
    if (a.t == V_UNDEF) undefined_err(J, pos, a);
    if (b.t == V_UNDEF) undefined_err(J, pos, b);
    int c = v_compare(J, pos, a, b);
    switch (op) {
    case OP_LT: return c < 0;
    case OP_LE: return c <= 0;
    case OP_GT: return c > 0;
    default: return c >= 0;
    }
}

static value compare(jstate *J, const node *e) {
    value a = eval(J, e->args.v[0]);
    for (int i = 1; i < e->args.n; i++) {
        value b = eval(J, e->args.v[i]);
        if (!compare1(J, e->pos, e->ops[i - 1], a, b)) return v_bool(0);
        a = b;
    }
    return v_bool(1);
}

// ============================================================================
// expressions
// ============================================================================

typedef struct {
    value *args;
    int nargs;
    const char **kwn;
    value *kwv;
    int nkw;
} callargs;

static callargs eval_args(jstate *J, const node *e) {
    callargs c = {0};
    c.nargs = e->args.n;
    c.nkw = e->kwargs.n;
    if (c.nargs) c.args = jalloc(J, (size_t)c.nargs * sizeof *c.args);
    if (c.nkw) c.kwv = jalloc(J, (size_t)c.nkw * sizeof *c.kwv);
    for (int i = 0; i < c.nargs; i++) c.args[i] = eval(J, e->args.v[i]);
    for (int i = 0; i < c.nkw; i++) c.kwv[i] = eval(J, e->kwargs.v[i]);
    c.kwn = e->kwnames;
    return c;
}

static value call(jstate *J, const node *e) {
    const node *f = e->a;
    if (f->kind == E_ATTR) {
        value obj = eval(J, f->a);
        if (obj.t == V_UNDEF) undefined_err(J, f->pos, obj);
        value *member = obj.t == V_DICT ? dict_get(obj.d, f->s, strlen(f->s)) : NULL;
        if (!member || (member->t != V_MACRO && member->t != V_FUNC)) {
            callargs c = eval_args(J, e);
            return call_method(J, f->pos, obj, f->s, c.args, c.nargs, c.kwn, c.kwv, c.nkw);
        }
    }
    value fn = eval(J, f);
    callargs c = eval_args(J, e);
    if (fn.t == V_MACRO) return call_macro(J, e, fn, c.args, c.nargs, c.kwn, c.kwv, c.nkw);
    if (fn.t == V_FUNC) return call_global(J, e->pos, fn.fn, c.args, c.nargs, c.kwn, c.kwv, c.nkw);
    if (fn.t == V_UNDEF) undefined_err(J, f->pos, fn);
    jerr(J, e->pos, "'%s' object is not callable", v_typename(fn));
}

static value eval_node(jstate *J, const node *e);

// Evaluation depth is bounded on its own: macro recursion multiplies the
// syntax depth, and the C stack must survive hostile templates.
value eval(jstate *J, const node *e) {
    if (++J->edepth > J_MAX_EVAL_DEPTH) jerr(J, e->pos, "evaluation nested deeper than %d", J_MAX_EVAL_DEPTH);
    value v = eval_node(J, e);
    J->edepth--;
    return v;
}

static value eval_node(jstate *J, const node *e) {
    value a, b;
    switch (e->kind) {
    case E_LIT: return e->lit;
    case E_NAME: return lookup(J, e->s);
    case E_LIST:
    case E_TUPLE:
        a = v_list(J);
        a.l->is_tuple = e->kind == E_TUPLE;
        for (int i = 0; i < e->args.n; i++) list_push(J, a.l, eval(J, e->args.v[i]));
        return a;
    case E_DICT:
        a = v_dict(J);
        for (int i = 0; i + 1 < e->args.n; i += 2) {
            value k = eval(J, e->args.v[i]);
            dict_set(J, a.d, k, eval(J, e->args.v[i + 1]));
        }
        return a;
    case E_ATTR: a = eval(J, e->a); return v_getattr(J, e->pos, a, e->s, strlen(e->s));
    case E_INDEX: a = eval(J, e->a); b = eval(J, e->b); return v_getitem(J, e->pos, a, b);
    case E_SLICE: a = eval(J, e->a); return slice(J, e, a);
    case E_CALL: return call(J, e);
    case E_FILTER: {
        a = eval(J, e->a);
        callargs c = eval_args(J, e);
        return apply_filter(J, e, a, c.args, c.nargs, c.kwn, c.kwv, c.nkw);
    }
    case E_TEST: {
        a = eval(J, e->a);
        callargs c = eval_args(J, e);
        int r = apply_test(J, e, a, c.args, c.nargs);
        return v_bool(e->op ? !r : r);
    }
    case E_NEG:
    case E_POS:
        a = eval(J, e->a);
        if (a.t == V_INT) {
            if (e->kind == E_NEG && a.i == INT64_MIN) jerr(J, e->pos, "integer overflow");
            return v_int(e->kind == E_NEG ? -a.i : a.i);
        }
        if (a.t == V_BOOL) return v_int(e->kind == E_NEG ? -a.b : a.b);
        if (a.t == V_FLOAT) return v_float(e->kind == E_NEG ? -a.f : a.f);
        if (a.t == V_UNDEF) undefined_err(J, e->pos, a);
        jerr(J, e->pos, "bad operand type for unary %s: '%s'", e->kind == E_NEG ? "-" : "+", v_typename(a));
    case E_NOT: return v_bool(!v_truthy(eval(J, e->a)));
    case E_AND: a = eval(J, e->a); return v_truthy(a) ? eval(J, e->b) : a;
    case E_OR: a = eval(J, e->a); return v_truthy(a) ? a : eval(J, e->b);
    case E_BIN: a = eval(J, e->a); b = eval(J, e->b); return binop(J, e, a, b);
    case E_CMP: return compare(J, e);
    case E_COND:
        if (v_truthy(eval(J, e->b))) return eval(J, e->a);
        return e->c ? eval(J, e->c) : v_undef(NULL);
    default:
        jerr(J, e->pos, "internal: not an expression");
    }
}

// ============================================================================
// statements
// ============================================================================

static scope *push_scope(jstate *J, scope *parent) {
    scope *s = jalloc(J, sizeof *s);
    s->parent = parent;
    return s;
}

static int exec_for(jstate *J, const node *s) {
    value items = v_iterate(J, s->a->pos, eval(J, s->a));
    scope *outer = J->cur;
    // `for x in xs if cond`: filter first, loop.length counts what is left
    if (s->b) {
        value kept = v_list(J);
        for (int i = 0; i < items.l->n; i++) {
            if (++J->iters > J_MAX_ITERS) jerr(J, s->pos, "more than %d loop iterations", J_MAX_ITERS);
            J->cur = push_scope(J, outer);
            assign_targets(J, &s->args, items.l->v[i], s->pos);
            int keep = v_truthy(eval(J, s->b));
            J->cur = outer;
            if (keep) list_push(J, kept.l, items.l->v[i]);
        }
        items = kept;
    }
    int n = items.l->n;
    for (int i = 0; i < n; i++) {
        if (++J->iters > J_MAX_ITERS) jerr(J, s->pos, "more than %d loop iterations", J_MAX_ITERS);
        J->cur = push_scope(J, outer);
        assign_targets(J, &s->args, items.l->v[i], s->pos);
        value loop = {.t = V_LOOP};
        loop.lp = jalloc(J, sizeof *loop.lp);
        loop.lp->index0 = i;
        loop.lp->length = n;
        loop.lp->items = items.l;
        dict_setc(J, &J->cur->vars, "loop", loop);
        int r = exec_list(J, &s->body);
        J->cur = outer;
        if (r == 1) break;
    }
    if (n == 0 && s->orelse.n) return exec_list(J, &s->orelse);
    return 0;
}

static value capture(jstate *J, const nlist *body) {
    jbuf b = {0}, *saved = J->out;
    J->out = &b;
    exec_list(J, body);
    J->out = saved;
    return v_str(b.p ? b.p : "", b.n);
}

value call_macro(jstate *J, const node *call, value m, value *args, int nargs,
                 const char **kwn, value *kwv, int nkw) {
    const node *mac = m.m;
    if (++J->calls > J_MAX_CALLS) jerr(J, call->pos, "macro calls nested deeper than %d", J_MAX_CALLS);
    scope *saved = J->cur;
    J->cur = push_scope(J, J->globals);
    int np = mac->args.n;
    for (int i = 0; i < np; i++) {
        const char *pname = mac->args.v[i]->s;
        value v = v_undef(pname);
        int set = 0;
        if (i < nargs) { v = args[i]; set = 1; }
        for (int k = 0; k < nkw && !set; k++)
            if (!strcmp(kwn[k], pname)) { v = kwv[k]; set = 1; }
        if (!set && mac->kwargs.v[i]) v = eval(J, mac->kwargs.v[i]);
        dict_setc(J, &J->cur->vars, pname, v);
    }
    for (int k = 0; k < nkw; k++) {
        int known = 0;
        for (int i = 0; i < np; i++)
            if (!strcmp(kwn[k], mac->args.v[i]->s)) known = 1;
        if (!known) jerr(J, call->pos, "macro '%s' has no parameter named '%s'", mac->s, kwn[k]);
    }
    value r = capture(J, &mac->body);
    J->cur = saved;
    J->calls--;
    return r;
}

static int exec_body(jstate *J, const nlist *body);

int exec_list(jstate *J, const nlist *body) {
    if (++J->edepth > J_MAX_EVAL_DEPTH) jerr(J, -1, "evaluation nested deeper than %d", J_MAX_EVAL_DEPTH);
    int r = exec_body(J, body);
    J->edepth--;
    return r;
}

static int exec_body(jstate *J, const nlist *body) {
    for (int i = 0; i < body->n; i++) {
        const node *s = body->v[i];
        int r = 0;
        switch (s->kind) {
        case S_TEXT: buf_put(J, J->out, s->lit.s.p, s->lit.s.n); break;
        case S_OUT: v_write_str(J, J->out, eval(J, s->a)); break;
        case S_IF: {
            int k;
            for (k = 0; k < s->args.n; k++)
                if (v_truthy(eval(J, s->args.v[k]))) break;
            if (k < s->args.n) r = exec_list(J, &s->body.v[k]->body);
            else r = exec_list(J, &s->orelse);
            break;
        }
        case S_FOR: r = exec_for(J, s); break;
        case S_SET: assign_targets(J, &s->args, eval(J, s->a), s->pos); break;
        case S_SETBLOCK: assign(J, s->args.v[0], capture(J, &s->body)); break;
        case S_MACRO: dict_setc(J, &J->cur->vars, s->s, (value){.t = V_MACRO, .m = s}); break;
        case S_BREAK: return 1;
        case S_CONTINUE: return 2;
        case S_BLOCK: r = exec_list(J, &s->body); break;
        default: jerr(J, s->pos, "internal: not a statement");
        }
        if (r) return r;
    }
    return 0;
}
