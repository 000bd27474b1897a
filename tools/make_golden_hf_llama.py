#!/usr/bin/python3
"""Writes random tiny Hugging Face Llama folders and the PyTorch peer's logits and loss on them.

Run with Debian's interpreter (python3-torch): /usr/bin/python3 tools/make_golden_hf_llama.py
The peer is Hugging Face's LlamaForCausalLM (modeling_llama.py) written out here from its
formulas in plain torch ops under Hugging Face's parameter names, without importing transformers:
RMSNorm, grouped-query attention (each key/value head repeated for its query heads, as repeat_kv
does) with rotary embeddings in the rotate-half layout on q and k (make_golden_llama.rotary,
with Llama 3's rope_scaling when config.json has one), a SwiGLU MLP, no biases, the LM head
tied to model.embed_tokens or lm_head.weight. Weights are float32 (so the files hold them
exactly); the goldens are computed from them in float64.

Writes, each folder a config.json and a float32 model.safetensors (hidden 32, 2 layers, 4 heads,
2 key/value heads, ffn 48, vocab 256, the byte values, so `train` runs on text):
- tests/data/hf_llama_tied/: tie_word_embeddings true (no lm_head.weight), theta 10000;
- tests/data/hf_llama_untied/: a separate lm_head.weight, theta 500000;
- tests/data/hf_llama_scaled/: untied, theta 10000 and rope_scaling of type "llama3" (factor 8,
  low 1, high 4, original context 64, so head_dim 8's four pairs fall in every band);
- tests/data/hf_llama_golden.json (format as tools/make_golden.py): for each folder NAME,
  "NAME.tokens" and "NAME.targets" [2, 8] and the peer's "NAME.logits" [2, 8, 256] and mean
  cross-entropy "NAME.loss".
"""

import json
import math

import torch
import torch.nn.functional as F

from make_golden import DATA_DIR, DTYPE, write
from make_golden_llama import causal_gqa
from make_llmc_sample import write_safetensors

SEED = 20261207
BATCH, SEQ = 2, 8
SIZES = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 48, "vocab_size": 256}
MODELS = {
    "tied": {"tie_word_embeddings": True, "rope_theta": 10000.0, "rope_scaling": None},
    "untied": {"tie_word_embeddings": False, "rope_theta": 500000.0, "rope_scaling": None},
    "scaled": {"tie_word_embeddings": False, "rope_theta": 10000.0,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 64}},
}


def config_of(choices):
    """A config.json as Hugging Face writes one, with fields mpitron ignores (token ids, ...)."""
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
              "attention_dropout": 0.0, "max_position_embeddings": 512, "rms_norm_eps": 1e-5,
              "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.02,
              "pretraining_tp": 1, "use_cache": True, "torch_dtype": "float32"}
    config.update(SIZES)
    config.update(choices)
    return config


def parameter_shapes(config):
    c, f, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    kv = config["num_key_value_heads"] * c // config["num_attention_heads"]
    shapes = {"model.embed_tokens.weight": (v, c)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (c,),
                       p + "self_attn.q_proj.weight": (c, c),
                       p + "self_attn.k_proj.weight": (kv, c),
                       p + "self_attn.v_proj.weight": (kv, c),
                       p + "self_attn.o_proj.weight": (c, c),
                       p + "post_attention_layernorm.weight": (c,),
                       p + "mlp.gate_proj.weight": (f, c), p + "mlp.up_proj.weight": (f, c),
                       p + "mlp.down_proj.weight": (c, f)})
    shapes["model.norm.weight"] = (c,)
    if not config["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (v, c)
    return shapes


def random_parameters(config, gen):
    """Norm weights 1 + N(0, 0.1^2), matrices N(0, 1/columns); float32 values, held as float64."""
    params = {}
    for name, shape in parameter_shapes(config).items():
        noise = torch.randn(shape, generator=gen, dtype=DTYPE)
        value = 1.0 + 0.1 * noise if len(shape) == 1 else noise / math.sqrt(shape[1])
        params[name] = value.float().to(DTYPE)
    return params


def rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def llama_logits(p, tokens, config):
    """LlamaForCausalLM's logits [batch, seq, vocab] of tokens [batch, seq] (positions 0..)."""
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    eps, theta, scaling = config["rms_norm_eps"], config["rope_theta"], config["rope_scaling"]
    x = p["model.embed_tokens.weight"][tokens]
    for i in range(config["num_hidden_layers"]):
        h = f"model.layers.{i}."
        a = rms_norm(x, p[h + "input_layernorm.weight"], eps)
        y = causal_gqa(a, p[h + "self_attn.q_proj.weight"], p[h + "self_attn.k_proj.weight"],
                       p[h + "self_attn.v_proj.weight"], heads, kv_heads, theta, scaling)
        x = x + y @ p[h + "self_attn.o_proj.weight"].t()
        m = rms_norm(x, p[h + "post_attention_layernorm.weight"], eps)
        gated = F.silu(m @ p[h + "mlp.gate_proj.weight"].t()) * (m @ p[h + "mlp.up_proj.weight"].t())
        x = x + gated @ p[h + "mlp.down_proj.weight"].t()
    head = p["model.embed_tokens.weight" if config["tie_word_embeddings"] else "lm_head.weight"]
    return rms_norm(x, p["model.norm.weight"], eps) @ head.t()


def write_folder(name, config, params):
    folder = DATA_DIR / f"hf_llama_{name}"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(str(folder / "model.safetensors"),
                      [(n, list(t.shape), t.flatten().tolist()) for n, t in params.items()])
    print(f"wrote {folder}")


def main():
    gen = torch.Generator().manual_seed(SEED)
    out = {}
    for name, choices in MODELS.items():
        config = config_of(choices)
        params = random_parameters(config, gen)
        write_folder(name, config, params)
        windows = torch.randint(0, config["vocab_size"], (BATCH, SEQ + 1), generator=gen)
        tokens, targets = windows[:, :SEQ], windows[:, 1:]
        logits = llama_logits(params, tokens, config)
        loss = F.cross_entropy(logits.reshape(-1, config["vocab_size"]), targets.reshape(-1))
        out.update({f"{name}.tokens": tokens, f"{name}.targets": targets,
                    f"{name}.logits": logits, f"{name}.loss": loss})
    write("hf_llama_golden.json", out)


if __name__ == "__main__":
    main()
