"""Trains hyspec's embedded default model: a small Nemotron-H hybrid (Mamba2 + attention + relu² MLP)
on the King James Bible, with its own byte-level BPE tokenizer, and writes a Hugging Face
`NemotronHForCausalLM` folder (BF16 weights) plus transformers' float32 reference outputs.

Usage: python3 train.py DATA_DIR OUT_DIR [--steps 200 300 450]
  DATA_DIR: train.txt and heldout.txt from prepare_data.py
  OUT_DIR:  gets config.json, generation_config.json, model.safetensors, tokenizer.json,
            tokenizer_config.json, reference.json and reference.safetensors; --metrics (default
            metrics.json) gets the losses, timings and training log
"""
import argparse
import json
import math
import os
import random
import time

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import NemotronHConfig, NemotronHForCausalLM

SPECIAL = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
PAD, BOS, EOS, IM_START, IM_END = range(5)
CHATML = ("{% for message in messages %}"
          "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
          "{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
VOCAB = 4096
SEQ = 512
BATCH = 32
PROMPTS = ["In the beginning God created",
           "And the LORD spake unto Moses, saying,",
           "Blessed are the poor in spirit:",
           "and the evening and the morning were the first day. And the evening and the morning were the"]

ap = argparse.ArgumentParser()
ap.add_argument("data")
ap.add_argument("out")
ap.add_argument("--steps", type=int, nargs="+", default=[200, 300, 450],
                help="candidate run lengths; the one with the lowest validation loss is shipped")
ap.add_argument("--metrics", default="metrics.json")
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
torch.manual_seed(0)
random.seed(0)
t_start = time.time()
train_text = open(os.path.join(args.data, "train.txt")).read()
held_text = open(os.path.join(args.data, "heldout.txt")).read()
VAL_BOOK = "Jonah"  # model selection; the held-out book (Ruth) is only ever evaluated
all_chapters = train_text.split("\n\n")
chapters = [c for c in all_chapters if not c.startswith(VAL_BOOK + " ")]
val_text = "\n".join(c for c in all_chapters if c.startswith(VAL_BOOK + " "))

# ---- tokenizer: byte-level BPE, 4096 entries, ids 0-4 special -------------------------------------
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIAL, min_frequency=2,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
tok.train_from_iterator(chapters, trainer)
tj = json.loads(tok.to_str())
# Write merges in the classic "a b" string form, which every tokenizers version reads.
tj["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
with open(os.path.join(args.out, "tokenizer.json"), "w") as f:
    json.dump(tj, f, ensure_ascii=False, indent=1)
tok = Tokenizer.from_file(os.path.join(args.out, "tokenizer.json"))
with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
               "pad_token": "<pad>", "model_max_length": 2048, "clean_up_tokenization_spaces": False,
               "chat_template": CHATML}, f, indent=1)
print(f"tokenizer: {tok.get_vocab_size()} entries ({time.time() - t_start:.1f}s)", flush=True)

# ---- token stream: chapters ending in </s>, plus ChatML exchanges (first half of a verse -> rest) ---
docs = [c.strip("\n") + "\n" for c in chapters]
chat = []
for c in chapters:
    lines = c.strip("\n").split("\n")[1:]
    for i, v in enumerate(lines):
        cut = [j for j, ch in enumerate(v) if ch in ",;:" and 10 < j < len(v) - 10]
        if cut and random.random() < 0.15:
            j = cut[len(cut) // 2] + 1
            answer = v[j:].strip() + ("\n" + lines[i + 1] if i + 1 < len(lines) else "")
            chat.append(f"<|im_start|>user\n{v[:j]}<|im_end|>\n<|im_start|>assistant\n{answer}<|im_end|>\n")
ids = []
encs = tok.encode_batch(docs + chat)
order = list(range(len(encs)))
random.shuffle(order)
for k in order:
    ids.extend(encs[k].ids)
    ids.append(EOS)
data = torch.tensor(ids, dtype=torch.long)
held = torch.tensor(tok.encode(held_text).ids, dtype=torch.long)
val = torch.tensor(tok.encode(val_text).ids, dtype=torch.long)
print(f"train tokens {len(data)} ({len(docs)} chapters, {len(chat)} chat exchanges); held-out tokens {len(held)}",
      flush=True)

# ---- model ----------------------------------------------------------------------------------------
pattern = ["mamba", "mlp", "mamba", "attention", "mlp", "mamba", "mlp", "mamba", "attention", "mlp"]
cfg = NemotronHConfig(
    vocab_size=VOCAB, hidden_size=256, intermediate_size=1024, layers_block_type=pattern,
    num_attention_heads=8, num_key_value_heads=2, head_dim=32,
    mamba_num_heads=16, mamba_head_dim=32, ssm_state_size=64, n_groups=2, conv_kernel=4, expand=2,
    chunk_size=64, use_mamba_kernels=False, max_position_embeddings=2048,
    bos_token_id=BOS, eos_token_id=[EOS, IM_END], pad_token_id=PAD, tie_word_embeddings=False,
)
dev = "cuda"
n_params = sum(p.numel() for p in NemotronHForCausalLM(cfg).parameters())
print(f"parameters: {n_params}", flush=True)
PEAK, WARMUP = 2e-3, 50


def windows(t, n):
    return [t[i:i + n] for i in range(0, len(t) - 1, n) if len(t[i:i + n]) >= 2]


@torch.no_grad()
def loss_on(m, seqs, device, autocast=True):
    total, count = 0.0, 0
    for s in seqs:
        x = s.unsqueeze(0).to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast and device == "cuda"):
            logits = m(input_ids=x, use_cache=False).logits
        total += F.cross_entropy(logits[0, :-1].float(), x[0, 1:], reduction="sum").item()
        count += len(s) - 1
    return total / count


def train(steps):
    """One run from the same initialisation: AdamW, warm-up then cosine decay to 10% over `steps`."""
    torch.manual_seed(0)
    model = NemotronHForCausalLM(cfg).to(dev)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=PEAK, betas=(0.9, 0.95), fused=True)
    gen = torch.Generator().manual_seed(1)
    log, smooth, t0 = [], None, time.time()
    model.train()
    for step in range(1, steps + 1):
        lr = PEAK * min(1.0, step / WARMUP) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, len(data) - SEQ - 1, (BATCH,), generator=gen)
        x = torch.stack([data[s:s + SEQ + 1] for s in starts]).to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        smooth = loss.item() if smooth is None else 0.95 * smooth + 0.05 * loss.item()
        if step % 50 == 0 or step == steps:
            model.eval()
            vl = loss_on(model, windows(val, SEQ), dev)
            model.train()
            log.append({"steps": steps, "step": step, "seconds": round(time.time() - t0, 1), "lr": lr,
                        "train_loss": smooth, "val_loss": vl})
            print(json.dumps(log[-1]), flush=True)
    return model, log, time.time() - t0


runs = {}
for steps in args.steps:
    runs[steps] = train(steps)
best = min(runs, key=lambda k: runs[k][1][-1]["val_loss"])
model, _, train_seconds = runs[best]
log = [e for k in runs for e in runs[k][1]]
step = best
print(f"chosen: {best} steps by validation loss ({VAL_BOOK}); {step * BATCH * SEQ} tokens, "
      f"{step * BATCH * SEQ / len(data):.1f} epochs, {train_seconds:.0f}s", flush=True)

# ---- ship BF16, then everything else from the shipped weights in float32 --------------------------
model.eval()
model.to(torch.bfloat16).save_pretrained(args.out)
shipped = NemotronHForCausalLM.from_pretrained(args.out, dtype=torch.float32).eval()
g = torch.Generator().manual_seed(2)
train_eval = [data[s:s + SEQ] for s in torch.randint(0, len(data) - SEQ, (64,), generator=g)]
shipped_gpu = shipped.to(dev)
torch.backends.cuda.matmul.allow_tf32 = False
final_train = loss_on(shipped_gpu, train_eval, dev, autocast=False)
final_held = loss_on(shipped_gpu, windows(held, SEQ), dev, autocast=False)
shipped = shipped_gpu.to("cpu")
counts = torch.bincount(data, minlength=VOCAB).double() + 1
uni_train = -(torch.log(counts / counts.sum())[held[1:]]).mean().item()
hc = torch.bincount(held, minlength=VOCAB).double()
hp = hc[hc > 0] / hc.sum()
uni_self = -(hp * hp.log()).sum().item()
print(f"float32 from BF16: train loss {final_train:.4f}, held-out loss {final_held:.4f}; unigram baselines: "
      f"fitted on train (add-one) {uni_train:.4f}, fitted on the held-out text itself {uni_self:.4f}", flush=True)

# ---- references (CPU, float32): full-sequence logits and greedy rollouts --------------------------
prompts = [tok.encode(p).ids for p in PROMPTS]
refs, greedy = {}, []
shipped.generation_config.eos_token_id = None  # run the full 32 tokens, as hyspec's parity test does
shipped.generation_config.pad_token_id = PAD
with torch.no_grad():
    for i, p in enumerate(prompts):
        x = torch.tensor([p])
        refs[f"logits_{i}"] = shipped(x, use_cache=False).logits[0].float().contiguous()
        cached = shipped.generate(x, do_sample=False, max_new_tokens=32)[0, len(p):].tolist()
        nocache, cur = [], list(p)
        for _ in range(32):
            nxt = int(shipped(torch.tensor([cur]), use_cache=False).logits[0, -1].argmax())
            nocache.append(nxt)
            cur.append(nxt)
        greedy.append({"cached": cached, "nocache": nocache, "agree": cached == nocache})
        print(f"prompt {i}: {PROMPTS[i]!r} -> {tok.decode(nocache)!r} (agree={cached == nocache})", flush=True)
save_file(refs, os.path.join(args.out, "reference.safetensors"))
with open(os.path.join(args.out, "reference.json"), "w") as f:
    json.dump({"arch": "NemotronHForCausalLM", "prompts": prompts, "greedy": greedy}, f, indent=1)

# ---- check the folder the way users read it -------------------------------------------------------
from transformers import AutoTokenizer
hf_tok = AutoTokenizer.from_pretrained(args.out)
chat_ids = hf_tok.apply_chat_template([{"role": "user", "content": "In the beginning God created"}],
                                      add_generation_prompt=True, tokenize=True)
if isinstance(chat_ids, dict) or hasattr(chat_ids, "input_ids"):
    chat_ids = chat_ids["input_ids"]
with torch.no_grad():
    out = shipped.generate(torch.tensor([chat_ids]), do_sample=False, max_new_tokens=40,
                           eos_token_id=[EOS, IM_END])[0, len(chat_ids):].tolist()
print("chat:", repr(hf_tok.decode(out)), flush=True)
assert hf_tok.encode(held_text[:2000], add_special_tokens=False) == tok.encode(held_text[:2000]).ids

size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
metrics = {"parameters": n_params, "steps": step, "batch": BATCH, "seq_len": SEQ, "train_tokens": len(data),
           "heldout_tokens": len(held), "train_seconds": round(train_seconds, 1), "val_book": VAL_BOOK,
           "val_tokens": len(val), "candidates": {k: runs[k][1][-1] for k in runs},
           "total_seconds": round(time.time() - t_start, 1), "device": torch.cuda.get_device_name(0),
           "torch": torch.__version__, "final_train_loss": final_train, "final_heldout_loss": final_held,
           "unigram_train_fitted_heldout_loss": uni_train, "unigram_heldout_self_entropy": uni_self,
           "folder_bytes": size, "log": log, "greedy_agree": [g["agree"] for g in greedy]}
with open(args.metrics, "w") as f:
    json.dump(metrics, f, indent=1)
print(json.dumps({k: v for k, v in metrics.items() if k != "log"}), flush=True)
