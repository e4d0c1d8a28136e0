#!/usr/bin/env python3
"""Makes a tiny reference checkpoint of a family, in the format of
../shared/fixtures/hf/<family>/ (see its README.md): config.json,
generation_config.json, model.safetensors (bf16), and transformers' float32
outputs on the stored weights with eager attention: ref_logits.f32 (T x V),
ref_hidden_last.f32 ((L+1) x H at the last position) and reference.json.

For families the shared fixtures do not have (OLMo 2, Cohere 2); the results
live in tests/data/fixtures/<family>/ and test_fixtures reads them there.

Needs torch and transformers (run on the device machine):
    python3 scripts/gen-fixture.py OUTDIR [family...]
"""
import json, os, sys
import numpy as np
import torch
import transformers as tf

SEQ, PROMPT, NEW = 24, 8, 16

def families():
    base = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return {
        # post-norm blocks (norms after attention and the MLP, none before),
        # RMSNorm on the whole q and k projections
        "olmo2": (tf.Olmo2Config, tf.Olmo2ForCausalLM,
                  dict(base, rms_norm_eps=1e-6, tie_word_embeddings=False,
                       rope_parameters=dict(rope_type="default", rope_theta=500000.0))),
        # parallel attention and MLP off one LayerNorm (no bias), 3 sliding
        # layers with RoPE : 1 global layer without, logit scale, tied
        "cohere2": (tf.Cohere2Config, tf.Cohere2ForCausalLM,
                    dict(base, layer_norm_eps=1e-5, tie_word_embeddings=True, logit_scale=0.25,
                         sliding_window=8,
                         layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
                         rope_parameters=dict(rope_type="default", rope_theta=50000.0))),
    }

def perturb(model, g):
    # Random but non-trivial: norm weights away from 1, embeddings and
    # matrices large enough that the logits are far from uniform.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            elif "embed" in name:
                p.copy_(0.8 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / np.sqrt(p.shape[-1]))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))  # the stored values

def make(out, fam):
    cfg_cls, model_cls, kw = families()[fam]
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1234)
    cfg = cfg_cls(**kw)
    cfg._attn_implementation = "eager"
    model = model_cls(cfg).eval().to(torch.float32)
    perturb(model, g)
    d = os.path.join(out, fam)
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(7)
    ids = [int(i) for i in rng.integers(3, cfg.vocab_size, SEQ)]
    x = torch.tensor([ids])
    with torch.no_grad():
        o = model(x, output_hidden_states=True)
        logits = o.logits[0].to(torch.float32).numpy()
        hidden = torch.stack([h[0, -1] for h in o.hidden_states]).to(torch.float32).numpy()
        gen = model.generate(torch.tensor([ids[:PROMPT]]), max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False,
                             use_cache=True, pad_token_id=0)
    new = [int(t) for t in gen[0, PROMPT:]]
    logits.astype("<f4").tofile(os.path.join(d, "ref_logits.f32"))
    hidden.astype("<f4").tofile(os.path.join(d, "ref_hidden_last.f32"))
    model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
    ref = dict(family=fam, model_class=model_cls.__name__, stored_dtype="bfloat16", input_ids=ids,
               logits_shape=list(logits.shape), hidden_last_shape=list(hidden.shape),
               hidden_last_note="residual stream at the last position: row 0 = embeddings (after any scaling), "
                                "row i = after layer i (last row: after final norm in transformers' convention)",
               greedy_prompt=ids[:PROMPT], greedy_new_tokens=new,
               top1=[int(t) for t in logits.argmax(-1)],
               transformers=tf.__version__, torch=torch.__version__)
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print(fam, "ok:", sorted(os.listdir(d)), "top1", ref["top1"][:8], "greedy", new[:8])

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for fam in sys.argv[2:] or families():
        make(sys.argv[1], fam)
