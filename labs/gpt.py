"""A tiny decoder-only transformer (GPT), shared by the later chapters, and its pretraining.

The model is the GPT-2 recipe at toy scale: token and position embeddings, ``n_layer``
pre-norm blocks of causal self-attention and a GELU MLP, a final layer norm and a language-model
head tied to the token embedding.  Every linear layer has a stable name, so that LoRA, sharding
and quantization code can pick layers by name::

    blocks.{i}.attn.q_proj   blocks.{i}.attn.k_proj   blocks.{i}.attn.v_proj   blocks.{i}.attn.o_proj
    blocks.{i}.mlp.up_proj   blocks.{i}.mlp.down_proj

The whole interface::

    from labs import data, gpt
    cfg = gpt.GPTConfig()                        # vocab 96 (printable ASCII + newline)
    model = gpt.GPT(cfg)                         # seeded by cfg.seed
    logits = model(idx)                          # idx (B, T) int64 -> logits (B, T, vocab_size)
    loss = model.loss(idx, targets)              # mean cross entropy; targets == -100 are ignored
    losses = gpt.train(model, batches, steps=200, lr=3e-3)   # list of per-step losses
    model, losses = gpt.pretrain(cfg, steps=300)  # the corpus of labs.data, deterministic
    text = model.generate(idx, max_new_tokens=50, temperature=0.0)   # greedy when temperature=0

``train`` and ``evaluate`` are defined in :mod:`labs.training.loop` and re-exported here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from labs.training.loop import evaluate, train  # the loop lives there; re-exported here

__all__ = ["GPTConfig", "GPT", "train", "pretrain", "evaluate"]


@dataclass
class GPTConfig:
    """Size of the tiny GPT.

    Attributes:
        vocab_size: number of token ids (96 = the character tokenizer of :mod:`labs.data`).
        block_size: longest sequence the position embedding covers, in tokens.
        n_layer: number of transformer blocks.
        n_head: attention heads per block; ``n_embd`` must be divisible by it.
        n_embd: width of the residual stream.
        dropout: dropout probability (0 keeps training deterministic and fast).
        bias: whether linear layers and layer norms have a bias.
        tie_weights: share the token embedding with the output head (GPT-2 does).
        seed: seed of the weight initialisation.
    """

    vocab_size: int = 96
    block_size: int = 128
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 96
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(
                f"GPTConfig: n_embd={self.n_embd} is not divisible by n_head={self.n_head}; "
                "pick n_embd as a multiple of n_head"
            )
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            if getattr(self, name) <= 0:
                raise ValueError(f"GPTConfig: {name} must be positive, got {getattr(self, name)}")


class CausalSelfAttention(nn.Module):
    """Multi-head attention where position t attends to positions <= t. Shape (B, T, C) -> same."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        c = cfg.n_embd
        self.n_head = cfg.n_head
        self.dropout = cfg.dropout
        self.q_proj = nn.Linear(c, c, bias=cfg.bias)
        self.k_proj = nn.Linear(c, c, bias=cfg.bias)
        self.v_proj = nn.Linear(c, c, bias=cfg.bias)
        self.o_proj = nn.Linear(c, c, bias=cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        h = self.n_head

        def heads(y: torch.Tensor) -> torch.Tensor:  # (B, T, C) -> (B, H, T, C/H)
            return y.view(b, t, h, c // h).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    """Position-wise feed-forward layer: C -> 4C -> GELU -> C."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.up_proj = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.down_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.down_proj(F.gelu(self.up_proj(x))))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(ln(x))`` then ``x + mlp(ln(x))``."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """The tiny GPT. ``model(idx)`` maps token ids (B, T) to next-token logits (B, T, vocab)."""

    def __init__(self, config: GPTConfig | None = None):
        super().__init__()
        cfg = config or GPTConfig()
        self.config = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.tok_emb.weight
        self._init_weights(cfg.seed)

    @torch.no_grad()
    def _init_weights(self, seed: int) -> None:
        # GPT-2 initialisation: N(0, 0.02), residual output projections scaled by 1/sqrt(2 L).
        gen = torch.Generator().manual_seed(seed)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif p.dim() == 1:  # layer-norm gains
                p.fill_(1.0)
            else:
                std = 0.02
                if name.endswith(("o_proj.weight", "down_proj.weight")):
                    std /= math.sqrt(2 * self.config.n_layer)
                p.copy_(torch.randn(p.shape, generator=gen) * std)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits of the next token.

        Args:
            idx: token ids, shape (B, T), dtype int64, T <= ``config.block_size``.

        Returns:
            Logits, shape (B, T, vocab_size), in the dtype of the weights.
        """
        if idx.dim() != 2:
            raise ValueError(f"GPT: expected token ids of shape (B, T), got {tuple(idx.shape)}")
        t = idx.shape[1]
        if t > self.config.block_size:
            raise ValueError(
                f"GPT: sequence length {t} exceeds block_size={self.config.block_size}; "
                "crop the input or build the model with a larger block_size"
            )
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross entropy in nats; positions where ``targets == -100`` are skipped.

        Args:
            idx: inputs, shape (B, T).
            targets: the token that follows each input position, shape (B, T).
        """
        logits = self(idx)
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100
        )

    def num_params(self, trainable_only: bool = False) -> int:
        """Number of parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
        stop_token: int | None = None,
    ) -> torch.Tensor:
        """Append ``max_new_tokens`` tokens to ``idx`` (B, T); greedy when ``temperature == 0``.

        Generation stops early once every row has produced ``stop_token`` (if given). ``idx`` and
        ``generator`` are on the model's device. No KV cache: each step recomputes the whole
        (cropped) context, which is fine at this size.
        """
        was_training = self.training
        self.eval()
        done = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.config.block_size :])[:, -1, :].float()
            if temperature == 0.0:
                nxt = logits.argmax(dim=-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                probs = torch.softmax(logits, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator)
            idx = torch.cat([idx, nxt], dim=1)
            if stop_token is not None:
                done |= nxt.squeeze(1) == stop_token
                if bool(done.all()):
                    break
        self.train(was_training)
        return idx


def pretrain(
    config: GPTConfig | None = None,
    steps: int = 300,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
) -> tuple[GPT, list[float]]:
    """Build a GPT and train it on the corpus of :mod:`labs.data` (deterministic for a seed).

    Sequences are ``config.block_size`` characters long, drawn from the training split.

    Returns:
        ``(model, losses)``: the trained model and the per-step training loss.
    """
    from labs import data

    cfg = config or GPTConfig()
    torch.manual_seed(seed)
    tok = data.CharTokenizer()
    train_ids, _ = data.split(tok.encode(data.load_corpus()))
    model = GPT(cfg)
    stream = data.batches(train_ids, batch_size, cfg.block_size, seed=seed)
    losses = train(model, stream, steps, lr=lr, warmup_steps=min(20, steps // 10))
    return model, losses
