// Jinja parser: the lexer's tokens (jinja_lex.c) -> statement tree. Recursive
// descent, one function a precedence level for the expressions, then the
// statements ({% if %}, {% for %}, {% set %}, {% macro %}, ...), each tag's
// body up to its end tag; nesting is bounded (J_MAX_DEPTH). Last, every
// filter and test the template names outside a branch that may not run is
// checked against the builtins, so a misspelt one fails at parse time.
#include <string.h>

#include "inference/jinja_impl.h"

void nlist_push(jstate *J, nlist *l, node *n) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        node **nv = jalloc(J, (size_t)cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = n;
}

// ============================================================================
// parser
// ============================================================================

static token *peek(parser *P) { return &P->tok[P->at]; }
static token *next(parser *P) { token *k = &P->tok[P->at]; if (k->t != T_EOF) P->at++; return k; }

static token *peek2(parser *P) { return P->at + 1 < P->n ? &P->tok[P->at + 1] : &P->tok[P->n - 1]; }

static int is_op(token *k, const char *op) { return k->t == T_OP && strcmp(k->s, op) == 0; }
static int is_name(token *k, const char *nm) { return k->t == T_NAME && strcmp(k->s, nm) == 0; }

static const char *tok_desc(token *k) {
    switch (k->t) {
    case T_EOF: return "end of template";
    case T_BLOCK_END: return "end of tag '%}'";
    case T_VAR_END: return "end of tag '}}'";
    case T_NAME: case T_OP: return k->s;
    case T_STR: return "string";
    default: return "token";
    }
}

static void expect_op(parser *P, const char *op) {
    token *k = next(P);
    if (!is_op(k, op)) jerr(P->J, k->pos, "expected '%s', got '%s'", op, tok_desc(k));
}

static const char *expect_name(parser *P) {
    token *k = next(P);
    if (k->t != T_NAME) jerr(P->J, k->pos, "expected a name, got '%s'", tok_desc(k));
    return k->s;
}

static node *mk(parser *P, nkind kind, int pos) {
    node *e = jalloc(P->J, sizeof *e);
    e->kind = kind;
    e->pos = pos;
    return e;
}

static void enter(parser *P, int pos) {
    if (++P->J->depth > J_MAX_DEPTH) jerr(P->J, pos, "template nested deeper than %d", J_MAX_DEPTH);
}
static void leave(parser *P) { P->J->depth--; }

static node *parse_expr(parser *P);
static node *parse_or(parser *P);
static node *parse_unary(parser *P, int with_filter);

// Call arguments after '(' up to ')': positional into args, keyword into kwargs.
static void parse_args(parser *P, node *e) {
    int nk = 0, capk = 0;
    while (!is_op(peek(P), ")")) {
        token *k = peek(P);
        if (k->t == T_NAME && is_op(peek2(P), "=")) {
            next(P);
            next(P);
            if (nk == capk) {
                capk = capk ? capk * 2 : 4;
                const char **nn = jalloc(P->J, (size_t)capk * sizeof *nn);
                if (nk) memcpy(nn, e->kwnames, (size_t)nk * sizeof *nn);
                e->kwnames = nn;
            }
            e->kwnames[nk++] = k->s;
            nlist_push(P->J, &e->kwargs, parse_expr(P));
        } else {
            if (nk) jerr(P->J, k->pos, "positional argument after keyword argument");
            nlist_push(P->J, &e->args, parse_expr(P));
        }
        if (!is_op(peek(P), ",")) break;
        next(P);
    }
    expect_op(P, ")");
}

static node *parse_primary(parser *P) {
    token *k = next(P);
    node *e;
    switch (k->t) {
    case T_STR: {
        // adjacent string literals concatenate
        jbuf b = {0};
        buf_put(P->J, &b, k->s, k->n);
        while (peek(P)->t == T_STR) { token *k2 = next(P); buf_put(P->J, &b, k2->s, k2->n); }
        e = mk(P, E_LIT, k->pos);
        e->lit = v_str(b.p ? b.p : "", b.n);
        return e;
    }
    case T_INT: e = mk(P, E_LIT, k->pos); e->lit = v_int(k->i); return e;
    case T_FLOAT: e = mk(P, E_LIT, k->pos); e->lit = v_float(k->f); return e;
    case T_NAME:
        e = mk(P, E_LIT, k->pos);
        if (!strcmp(k->s, "true") || !strcmp(k->s, "True")) e->lit = v_bool(1);
        else if (!strcmp(k->s, "false") || !strcmp(k->s, "False")) e->lit = v_bool(0);
        else if (!strcmp(k->s, "none") || !strcmp(k->s, "None")) e->lit = v_none();
        else { e->kind = E_NAME; e->s = k->s; }
        return e;
    case T_OP:
        if (is_op(k, "(")) {
            if (is_op(peek(P), ")")) { next(P); return mk(P, E_TUPLE, k->pos); }
            node *x = parse_expr(P);
            if (is_op(peek(P), ",")) {
                node *t = mk(P, E_TUPLE, k->pos);
                nlist_push(P->J, &t->args, x);
                while (is_op(peek(P), ",")) {
                    next(P);
                    if (is_op(peek(P), ")")) break;
                    nlist_push(P->J, &t->args, parse_expr(P));
                }
                x = t;
            }
            expect_op(P, ")");
            return x;
        }
        if (is_op(k, "[")) {
            e = mk(P, E_LIST, k->pos);
            while (!is_op(peek(P), "]")) {
                nlist_push(P->J, &e->args, parse_expr(P));
                if (!is_op(peek(P), ",")) break;
                next(P);
            }
            expect_op(P, "]");
            return e;
        }
        if (is_op(k, "{")) {
            e = mk(P, E_DICT, k->pos);
            while (!is_op(peek(P), "}")) {
                nlist_push(P->J, &e->args, parse_expr(P));
                expect_op(P, ":");
                nlist_push(P->J, &e->args, parse_expr(P));
                if (!is_op(peek(P), ",")) break;
                next(P);
            }
            expect_op(P, "}");
            return e;
        }
        break;
    default: break;
    }
    jerr(P->J, k->pos, "unexpected '%s' in expression", tok_desc(k));
}

static node *parse_postfix(parser *P, node *e) {
    for (;;) {
        token *k = peek(P);
        if (is_op(k, ".")) {
            next(P);
            token *a = next(P);
            node *x = mk(P, E_ATTR, a->pos);
            x->a = e;
            if (a->t == T_NAME) x->s = a->s;
            else if (a->t == T_INT) {   // x.0 is x[0]
                x->kind = E_INDEX;
                x->b = mk(P, E_LIT, a->pos);
                x->b->lit = v_int(a->i);
            } else jerr(P->J, a->pos, "expected an attribute name after '.'");
            e = x;
        } else if (is_op(k, "[")) {
            next(P);
            node *x = mk(P, E_INDEX, k->pos);
            x->a = e;
            node *parts[3] = {0};
            int colons = 0;
            for (;;) {
                token *t = peek(P);
                if (is_op(t, "]")) break;
                if (is_op(t, ":")) {
                    if (++colons > 2) jerr(P->J, t->pos, "too many ':' in slice");
                    next(P);
                    continue;
                }
                if (parts[colons]) jerr(P->J, t->pos, "expected ']' or ':'");
                parts[colons] = parse_expr(P);
                if (!colons && is_op(peek(P), ",")) {   // x[a, b] indexes with the tuple (a, b)
                    node *tup = mk(P, E_TUPLE, parts[0]->pos);
                    nlist_push(P->J, &tup->args, parts[0]);
                    while (is_op(peek(P), ",")) {
                        next(P);
                        if (is_op(peek(P), "]")) break;
                        nlist_push(P->J, &tup->args, parse_expr(P));
                    }
                    parts[0] = tup;
                    break;
                }
            }
            expect_op(P, "]");
            if (colons) {
                x->kind = E_SLICE;
                x->b = parts[0];
                x->c = parts[1];
                x->d = parts[2];
            } else {
                if (!parts[0]) parts[0] = mk(P, E_TUPLE, k->pos);   // x[] is x[()]
                x->b = parts[0];
            }
            e = x;
        } else if (is_op(k, "(")) {
            next(P);
            node *x = mk(P, E_CALL, k->pos);
            x->a = e;
            parse_args(P, x);
            e = x;
        } else {
            return e;
        }
    }
}

// Filter and test names may be dotted (`a.b`); unknown ones fail only when
// evaluated, as in jinja2 3.x.
static const char *dotted_name(parser *P, token *nm) {
    if (!is_op(peek(P), ".") || peek2(P)->t != T_NAME) return nm->s;
    jbuf b = {0};
    buf_put(P->J, &b, nm->s, nm->n);
    while (is_op(peek(P), ".") && peek2(P)->t == T_NAME) {
        next(P);
        token *k = next(P);
        buf_putc(P->J, &b, '.');
        buf_put(P->J, &b, k->s, k->n);
    }
    return b.p;
}

// `x | f(args) | g`, `x is [not] test [arg]`
static node *parse_filters_tests(parser *P, node *e) {
    for (;;) {
        token *k = peek(P);
        if (is_op(k, "|")) {
            next(P);
            token *nm = next(P);
            if (nm->t != T_NAME) jerr(P->J, nm->pos, "expected a filter name after '|'");
            node *f = mk(P, E_FILTER, nm->pos);
            f->s = dotted_name(P, nm);
            f->a = e;
            // dotted filter names are not supported
            if (is_op(peek(P), "(")) { next(P); parse_args(P, f); }
            e = f;
        } else if (is_name(k, "is")) {
            next(P);
            node *t = mk(P, E_TEST, k->pos);
            if (is_name(peek(P), "not")) { next(P); t->op = 1; }
            token *nm = next(P);
            if (nm->t != T_NAME) jerr(P->J, nm->pos, "expected a test name after 'is'");
            t->s = dotted_name(P, nm);
            t->a = e;
            token *a = peek(P);
            if (is_op(a, "(")) { next(P); parse_args(P, t); }
            else if (a->t == T_STR || a->t == T_INT || a->t == T_FLOAT || is_op(a, "[") || is_op(a, "{") ||
                     (a->t == T_NAME && strcmp(a->s, "and") && strcmp(a->s, "or") && strcmp(a->s, "else"))) {
                // `is sameas false`, `is equalto 5`: one argument without parentheses
                if (is_name(a, "is")) jerr(P->J, a->pos, "cannot chain multiple tests with 'is'");
                node *arg = parse_primary(P);
                arg = parse_postfix(P, arg);
                nlist_push(P->J, &t->args, arg);
            }
            e = t;
        } else {
            return e;
        }
    }
}

static node *parse_unary(parser *P, int with_filter) {
    token *k = peek(P);
    node *e;
    enter(P, k->pos);
    if (is_op(k, "-") || is_op(k, "+")) {
        next(P);
        e = mk(P, is_op(k, "-") ? E_NEG : E_POS, k->pos);
        e->a = parse_unary(P, 0);
    } else {
        e = parse_postfix(P, parse_primary(P));
    }
    if (with_filter) e = parse_filters_tests(P, e);
    leave(P);
    return e;
}

static node *bin(parser *P, int op, int pos, node *a, node *b) {
    node *e = mk(P, E_BIN, pos);
    e->op = op;
    e->a = a;
    e->b = b;
    return e;
}

static node *parse_pow(parser *P) {
    node *e = parse_unary(P, 1);
    while (is_op(peek(P), "**")) {
        token *k = next(P);
        e = bin(P, OP_POW, k->pos, e, parse_unary(P, 1));
    }
    return e;
}

static node *parse_math2(parser *P) {
    node *e = parse_pow(P);
    for (;;) {
        token *k = peek(P);
        int op = is_op(k, "*") ? OP_MUL : is_op(k, "/") ? OP_DIV : is_op(k, "//") ? OP_FLOORDIV
               : is_op(k, "%") ? OP_MOD : 0;
        if (!op) return e;
        next(P);
        e = bin(P, op, k->pos, e, parse_pow(P));
    }
}

static node *parse_concat(parser *P) {
    node *e = parse_math2(P);
    while (is_op(peek(P), "~")) {
        token *k = next(P);
        e = bin(P, OP_CONCAT, k->pos, e, parse_math2(P));
    }
    return e;
}

static node *parse_math1(parser *P) {
    node *e = parse_concat(P);
    for (;;) {
        token *k = peek(P);
        int op = is_op(k, "+") ? OP_ADD : is_op(k, "-") ? OP_SUB : 0;
        if (!op) return e;
        next(P);
        e = bin(P, op, k->pos, e, parse_concat(P));
    }
}

// a < b == c chains like Python: (a < b) and (b == c), each operand evaluated once
static node *parse_compare(parser *P) {
    node *e = parse_math1(P);
    node *c = NULL;
    int cap = 0;
    for (;;) {
        token *k = peek(P);
        int op = is_op(k, "==") ? OP_EQ : is_op(k, "!=") ? OP_NE : is_op(k, "<") ? OP_LT
               : is_op(k, "<=") ? OP_LE : is_op(k, ">") ? OP_GT : is_op(k, ">=") ? OP_GE
               : is_name(k, "in") ? OP_IN : 0;
        if (!op && is_name(k, "not") && is_name(peek2(P), "in")) {
            next(P);
            op = OP_NOTIN;
        }
        if (!op) return c ? c : e;
        next(P);
        if (!c) {
            c = mk(P, E_CMP, k->pos);
            nlist_push(P->J, &c->args, e);
        }
        if (c->args.n - 1 == cap) {
            cap = cap ? cap * 2 : 2;
            int *no = jalloc(P->J, (size_t)cap * sizeof *no);
            if (c->args.n > 1) memcpy(no, c->ops, (size_t)(c->args.n - 1) * sizeof *no);
            c->ops = no;
        }
        c->ops[c->args.n - 1] = op;
        nlist_push(P->J, &c->args, parse_math1(P));
    }
}

static node *parse_not(parser *P) {
    token *k = peek(P);
    if (is_name(k, "not")) {
        next(P);
        enter(P, k->pos);
        node *e = mk(P, E_NOT, k->pos);
        e->a = parse_not(P);
        leave(P);
        return e;
    }
    return parse_compare(P);
}

static node *parse_and(parser *P) {
    node *e = parse_not(P);
    while (is_name(peek(P), "and")) {
        token *k = next(P);
        node *x = mk(P, E_AND, k->pos);
        x->a = e;
        x->b = parse_not(P);
        e = x;
    }
    return e;
}

static node *parse_or(parser *P) {
    node *e = parse_and(P);
    while (is_name(peek(P), "or")) {
        token *k = next(P);
        node *x = mk(P, E_OR, k->pos);
        x->a = e;
        x->b = parse_and(P);
        e = x;
    }
    return e;
}

static node *parse_expr(parser *P) {
    enter(P, peek(P)->pos);
    node *e = parse_or(P);
    while (is_name(peek(P), "if")) {
        token *k = next(P);
        node *c = mk(P, E_COND, k->pos);
        c->a = e;
        c->b = parse_or(P);
        if (is_name(peek(P), "else")) { next(P); c->c = parse_expr(P); }
        e = c;
    }
    leave(P);
    return e;
}

// An expression that may be an unparenthesised tuple: `a, b`.
static node *parse_tuple_expr_ex(parser *P, int condexpr) {
    node *e = condexpr ? parse_expr(P) : parse_or(P);
    if (!is_op(peek(P), ",")) return e;
    node *t = mk(P, E_TUPLE, e->pos);
    nlist_push(P->J, &t->args, e);
    while (is_op(peek(P), ",")) {
        next(P);
        token *k = peek(P);
        if (k->t == T_BLOCK_END || k->t == T_VAR_END) break;
        nlist_push(P->J, &t->args, condexpr ? parse_expr(P) : parse_or(P));
    }
    return t;
}

static node *parse_tuple_expr(parser *P) { return parse_tuple_expr_ex(P, 1); }

// ---- statements -------------------------------------------------------------

static void expect_block_end(parser *P) {
    token *k = next(P);
    if (k->t != T_BLOCK_END) jerr(P->J, k->pos, "expected '%%}', got '%s'", tok_desc(k));
}

// The end of a tag that opens a body: jinja2 accepts `{% if x: %}`.
static void expect_body_start(parser *P) {
    if (is_op(peek(P), ":")) next(P);
    expect_block_end(P);
}

// Parses statements until a block tag whose keyword is in `ends` (a
// NUL-separated list); returns that keyword (the tag's name token is consumed,
// the rest of the tag is not). At the top level ends is NULL.
static const char *parse_body(parser *P, nlist *out, const char *const *ends, int open_pos, const char *what);

static node *parse_stmt(parser *P, token *kw);

static const char *parse_body(parser *P, nlist *out, const char *const *ends, int open_pos, const char *what) {
    jstate *J = P->J;
    for (;;) {
        token *k = next(P);
        if (k->t == T_EOF) {
            if (ends) jerr(J, open_pos, "unclosed '%s' block (missing {%% %s %%})", what, ends[0]);
            return NULL;
        }
        if (k->t == T_TEXT) {
            node *t = mk(P, S_TEXT, k->pos);
            t->lit = v_str(k->s, k->n);
            nlist_push(J, out, t);
        } else if (k->t == T_VAR_BEGIN) {
            node *o = mk(P, S_OUT, k->pos);
            o->a = parse_tuple_expr(P);
            token *e = next(P);
            if (e->t != T_VAR_END) jerr(J, e->pos, "expected '}}', got '%s'", tok_desc(e));
            nlist_push(J, out, o);
        } else if (k->t == T_BLOCK_BEGIN) {
            token *kw = next(P);
            if (kw->t != T_NAME) jerr(J, kw->pos, "expected a statement name after '{%%'");
            if (ends)
                for (int i = 0; ends[i]; i++)
                    if (!strcmp(kw->s, ends[i])) return ends[i];
            enter(P, kw->pos);
            nlist_push(J, out, parse_stmt(P, kw));
            leave(P);
        } else {
            jerr(J, k->pos, "unexpected '%s'", tok_desc(k));
        }
    }
}

// Assignment / loop targets: name, name.attr (set only), or a tuple of names.
static void parse_targets(parser *P, node *s, int allow_attr) {
    for (;;) {
        token *k = next(P);
        if (k->t != T_NAME) jerr(P->J, k->pos, "expected a variable name, got '%s'", tok_desc(k));
        node *t = mk(P, E_NAME, k->pos);
        t->s = k->s;
        if (allow_attr && is_op(peek(P), ".")) {
            next(P);
            node *a = mk(P, E_ATTR, peek(P)->pos);
            a->a = t;
            a->s = expect_name(P);
            t = a;
        }
        nlist_push(P->J, &s->args, t);
        if (!is_op(peek(P), ",")) return;
        next(P);
    }
}

static node *parse_stmt(parser *P, token *kw) {
    jstate *J = P->J;
    const char *w = kw->s;
    if (!strcmp(w, "if")) {
        node *s = mk(P, S_IF, kw->pos);
        nlist_push(J, &s->args, parse_tuple_expr_ex(P, 0));
        expect_body_start(P);
        static const char *const ends[] = {"endif", "elif", "else", NULL};
        for (;;) {
            node *blk = mk(P, S_BLOCK, kw->pos);
            const char *e = parse_body(P, &blk->body, ends, kw->pos, "if");
            nlist_push(J, &s->body, blk);
            if (!strcmp(e, "elif")) {
                nlist_push(J, &s->args, parse_tuple_expr_ex(P, 0));
                expect_body_start(P);
            } else if (!strcmp(e, "else")) {
                expect_body_start(P);
                static const char *const end2[] = {"endif", NULL};
                parse_body(P, &s->orelse, end2, kw->pos, "if");
                expect_block_end(P);
                return s;
            } else {
                expect_block_end(P);
                return s;
            }
        }
    }
    if (!strcmp(w, "for")) {
        node *s = mk(P, S_FOR, kw->pos);
        parse_targets(P, s, 0);
        token *in = next(P);
        if (!is_name(in, "in")) jerr(J, in->pos, "expected 'in' in for loop");
        // the iterable: no conditional expression here (`if` filters the loop)
        node *it = parse_or(P);
        if (is_op(peek(P), ",")) {
            node *t = mk(P, E_TUPLE, it->pos);
            nlist_push(J, &t->args, it);
            while (is_op(peek(P), ",")) { next(P); nlist_push(J, &t->args, parse_or(P)); }
            it = t;
        }
        s->a = it;
        if (is_name(peek(P), "if")) { next(P); s->b = parse_expr(P); }
        // `recursive` is accepted; calling loop(...) is not supported (the loop is not callable)
        if (is_name(peek(P), "recursive")) next(P);
        expect_body_start(P);
        static const char *const ends[] = {"endfor", "else", NULL};
        const char *e = parse_body(P, &s->body, ends, kw->pos, "for");
        if (!strcmp(e, "else")) expect_body_start(P);
        else expect_block_end(P);
        if (!strcmp(e, "else")) {
            static const char *const end2[] = {"endfor", NULL};
            parse_body(P, &s->orelse, end2, kw->pos, "for");
            expect_block_end(P);
        }
        return s;
    }
    if (!strcmp(w, "set")) {
        node *s = mk(P, S_SET, kw->pos);
        parse_targets(P, s, 1);
        if (is_op(peek(P), "=")) {
            next(P);
            s->a = parse_tuple_expr(P);
            expect_block_end(P);
            return s;
        }
        // block set: {% set x %}...{% endset %} (optionally `| filter`)
        if (s->args.n != 1 || s->args.v[0]->kind != E_NAME) jerr(J, kw->pos, "block set needs one name");
        s->kind = S_SETBLOCK;
        if (is_op(peek(P), "|")) jerr(J, peek(P)->pos, "filters on block set are not supported");
        expect_body_start(P);
        static const char *const ends[] = {"endset", NULL};
        parse_body(P, &s->body, ends, kw->pos, "set");
        expect_block_end(P);
        return s;
    }
    if (!strcmp(w, "macro")) {
        node *s = mk(P, S_MACRO, kw->pos);
        s->s = expect_name(P);
        expect_op(P, "(");
        int nk = 0;
        while (!is_op(peek(P), ")")) {
            token *k = next(P);
            if (k->t != T_NAME) jerr(J, k->pos, "expected a parameter name");
            node *p = mk(P, E_NAME, k->pos);
            p->s = k->s;
            nlist_push(J, &s->args, p);
            node *def = NULL;
            if (is_op(peek(P), "=")) { next(P); def = parse_expr(P); nk++; }
            else if (nk) jerr(J, k->pos, "parameter without default after one with a default");
            nlist_push(J, &s->kwargs, def);
            if (!is_op(peek(P), ",")) break;
            next(P);
        }
        expect_op(P, ")");
        expect_body_start(P);
        static const char *const ends[] = {"endmacro", NULL};
        parse_body(P, &s->body, ends, kw->pos, "macro");
        expect_block_end(P);
        return s;
    }
    if (!strcmp(w, "break") || !strcmp(w, "continue")) {
        node *s = mk(P, w[0] == 'b' ? S_BREAK : S_CONTINUE, kw->pos);
        expect_block_end(P);
        return s;
    }
    if (!strcmp(w, "generation")) {   // transformers' assistant-mask tag: renders its body
        node *s = mk(P, S_BLOCK, kw->pos);
        expect_body_start(P);
        static const char *const ends[] = {"endgeneration", NULL};
        parse_body(P, &s->body, ends, kw->pos, "generation");
        expect_block_end(P);
        return s;
    }
    static const char *const closers[] = {"endif", "elif", "else", "endfor", "endset", "endmacro",
                                          "endgeneration", "endraw", NULL};
    for (int i = 0; closers[i]; i++)
        if (!strcmp(w, closers[i])) jerr(J, kw->pos, "unexpected '{%% %s %%}' with no open block", w);
    if (!strcmp(w, "do")) jerr(J, kw->pos, "'do' statements are not enabled in chat templates");
    jerr(J, kw->pos, "unsupported statement '%s'", w);
}

// jinja2 rejects unknown filters and tests when compiling, except inside an
// if statement or a conditional expression (a "soft frame"); a for-loop or
// macro body is a hard frame again, the loop's iterable is not.
static void check_names(jstate *J, const node *e, int soft);

static void check_list(jstate *J, const nlist *l, int soft) {
    for (int i = 0; i < l->n; i++)
        if (l->v[i]) check_names(J, l->v[i], soft);
}

static void check_names(jstate *J, const node *e, int soft) {
    if (!e) return;
    if (e->kind == E_FILTER && !soft && !jinja_builtin_known(e->s, 1)) jerr(J, e->pos, "unknown filter '%s'", e->s);
    if (e->kind == E_TEST && !soft && !jinja_builtin_known(e->s, 0)) jerr(J, e->pos, "unknown test '%s'", e->s);
    switch (e->kind) {
    case E_COND: soft = 1; break;
    case S_IF: check_list(J, &e->args, 1); check_list(J, &e->body, 1); check_list(J, &e->orelse, 1); return;
    case S_FOR:
        check_list(J, &e->args, soft);
        check_names(J, e->a, soft);
        check_names(J, e->b, 0);
        check_list(J, &e->body, 0);
        check_list(J, &e->orelse, 0);
        return;
    case S_MACRO: check_list(J, &e->kwargs, soft); check_list(J, &e->body, 0); return;
    default: break;
    }
    check_names(J, e->a, soft);
    check_names(J, e->b, soft);
    check_names(J, e->c, soft);
    check_names(J, e->d, soft);
    check_list(J, &e->args, soft);
    check_list(J, &e->kwargs, soft);
    check_list(J, &e->body, soft);
    check_list(J, &e->orelse, soft);
}

nlist jparse(jstate *J) {
    parser P = {.J = J};
    jlex(&P);
    nlist top = {0};
    parse_body(&P, &top, NULL, 0, NULL);
    check_list(J, &top, 0);
    return top;
}
