// Random-weight checkpoints of Gemma 3's shapes (synth.c).
#ifndef INFER_TOOLS_SYNTH_H
#define INFER_TOOLS_SYNTH_H

typedef struct {
    const char *name;
    int vocab, hidden, ffn, layers, heads, kv_heads, head_dim, window, max_pos;
} synth_shape;

// "270m", "1b", "4b", "12b", "27b", or NULL.
const synth_shape *synth_find(const char *name);
// Writes config.json and model.safetensors (bf16) of the shape in dir, with
// `layers` and `vocab` instead of the shape's where positive; 1 on success.
int synth_write(const char *dir, const synth_shape *sh, int layers, int vocab);
// Removes what synth_write wrote, and dir.
void synth_remove(const char *dir);

#endif
