#!/usr/bin/env python3
"""Checks `infer logits` against transformers on shapes other than the fixtures'.

For each family, builds a small random model with another head count, GQA
ratio, head_dim != hidden/heads, windows much shorter than the prompt, saves
it with transformers into a temporary directory (never the repo), and compares
our logits at every position (max error <= 1e-3 of the RMS, same top-1) and
16 greedy tokens with the KV cache.

Needs: pip install torch transformers safetensors numpy. Not part of the test
suite (CI has no torch); run by hand: python3 scripts/verify-shapes.py [family...]
"""
import json, os, subprocess, sys, tempfile
import numpy as np
import torch
import transformers as tf

BIN = os.path.join(os.path.dirname(__file__), "..", "build", "infer")

def cfgs():
    base = dict(vocab_size=300, max_position_embeddings=512, tie_word_embeddings=False)
    return {
        "llama": (tf.LlamaConfig, dict(hidden_size=96, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
                  head_dim=24, intermediate_size=160, rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0,
                  low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=32))),
        "mistral": (tf.MistralConfig, dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=1,
                    head_dim=12, intermediate_size=100, sliding_window=5)),
        "qwen2": (tf.Qwen2Config, dict(hidden_size=60, num_hidden_layers=2, num_attention_heads=3, num_key_value_heads=3,
                  intermediate_size=90, tie_word_embeddings=True)),
        "qwen3": (tf.Qwen3Config, dict(hidden_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=32, intermediate_size=96)),
        "gemma2": (tf.Gemma2Config, dict(hidden_size=72, num_hidden_layers=4, num_attention_heads=6, num_key_value_heads=2,
                   head_dim=20, intermediate_size=120, sliding_window=6, query_pre_attn_scalar=24,
                   attn_logit_softcapping=20.0, final_logit_softcapping=15.0, tie_word_embeddings=True)),
        "gemma3": (tf.Gemma3TextConfig, dict(hidden_size=64, num_hidden_layers=7, num_attention_heads=4, num_key_value_heads=1,
                   head_dim=24, intermediate_size=96, sliding_window=5, query_pre_attn_scalar=24, tie_word_embeddings=True,
                   rope_parameters={"full_attention": dict(rope_type="linear", rope_theta=1e6, factor=4.0),
                                    "sliding_attention": dict(rope_type="default", rope_theta=1e4)})),
        "gemma4": (tf.Gemma4TextConfig, dict(hidden_size=64, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=16, global_head_dim=64, intermediate_size=96, sliding_window=5, hidden_size_per_layer_input=8,
                   vocab_size_per_layer_input=300, num_kv_shared_layers=2, tie_word_embeddings=True,
                   layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention",
                                "sliding_attention", "full_attention"])),
        "gemma4_keqv": (tf.Gemma4TextConfig, dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=16, global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True,
                   intermediate_size=96, sliding_window=5, hidden_size_per_layer_input=0, tie_word_embeddings=True,
                   final_logit_softcapping=30.0,
                   layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"])),
        "starcoder2": (tf.Starcoder2Config, dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2,
                       intermediate_size=80, sliding_window=7, tie_word_embeddings=True)),
        "gpt2": (tf.GPT2Config, dict(n_embd=48, n_layer=3, n_head=3, n_positions=128, vocab_size=300)),
        "granite": (tf.GraniteConfig, dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
                    intermediate_size=100, embedding_multiplier=6.0, residual_multiplier=0.3, attention_multiplier=0.05,
                    logits_scaling=4.0)),
        "phi3": (tf.Phi3Config, dict(hidden_size=72, num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2,
                 intermediate_size=100, pad_token_id=0)),
        "mixtral": (tf.MixtralConfig, dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    intermediate_size=64, num_local_experts=8, num_experts_per_tok=3, sliding_window=6)),
        "qwen3_moe": (tf.Qwen3MoeConfig, dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                      head_dim=16, intermediate_size=64, moe_intermediate_size=40, num_experts=6, num_experts_per_tok=2,
                      norm_topk_prob=True)),
        "olmo2": (tf.Olmo2Config, dict(hidden_size=72, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
                  intermediate_size=100, rms_norm_eps=1e-5)),
        "cohere2": (tf.Cohere2Config, dict(hidden_size=96, num_hidden_layers=5, num_attention_heads=6, num_key_value_heads=3,
                    intermediate_size=120, sliding_window=5, logit_scale=0.5, tie_word_embeddings=True,
                    layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                                 "full_attention"])),
        "gpt_oss": (tf.GptOssConfig, dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                    head_dim=16, intermediate_size=48, num_local_experts=5, num_experts_per_tok=3, sliding_window=6)),
    }, base

def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / (p.shape[-1] ** 0.5))

def main():
    table, base = cfgs()
    names = sys.argv[1:] or list(table)
    bad = 0
    for name in names:
        cls, kw = table[name]
        kw = {**base, **kw}
        if name == "gpt2":
            kw.pop("max_position_embeddings")
        cfg = cls(**kw)
        cfg._attn_implementation = "eager"
        torch.manual_seed(0)
        model = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float().eval()
        randomize(model, 1)
        T = 70 if name != "gpt2" else 60
        ids = torch.randint(0, cfg.vocab_size if hasattr(cfg, "vocab_size") else 300, (1, T), generator=torch.Generator().manual_seed(2))
        with tempfile.TemporaryDirectory() as d:
            model.save_pretrained(d)
            with torch.no_grad():
                ref = model(ids).logits[0].float().numpy()
                gen = model.generate(ids[:, :12], max_new_tokens=16, do_sample=False, min_new_tokens=16)[0, 12:].tolist()
            out = os.path.join(d, "l.f32")
            r = subprocess.run([BIN, "logits", "-m", d, "--ids", ",".join(map(str, ids[0].tolist())), "--out", out],
                               capture_output=True, text=True)
            if r.returncode:
                print(f"{name:12s} FAILED to run: {r.stderr.strip()}"); bad += 1; continue
            got = np.fromfile(out, dtype=np.float32).reshape(ref.shape)
            g = subprocess.run([BIN, "run", "-m", d, "--ids", ",".join(map(str, ids[0, :12].tolist())), "-n", "16", "--ignore-eos", "--temp", "0"],
                               capture_output=True, text=True).stdout.strip()
        rms = float(np.sqrt((ref ** 2).mean()))
        err = float(np.abs(got - ref).max()) / rms
        top = bool((got.argmax(1) == ref.argmax(1)).all())
        greedy = g == ",".join(map(str, gen))
        ok = err <= 1e-3 and top and greedy
        bad += not ok
        print(f"{name:12s} T={T} max err {err:.2e} of RMS, top-1 {'same' if top else 'DIFFERS'}, greedy {'same' if greedy else 'DIFFERS: ' + g + ' vs ' + str(gen)}")
    print(f"{len(names) - bad} of {len(names)} families match")
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main())
