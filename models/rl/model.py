"""The Algorithm-Distillation transformer, readable top to bottom (nanoGPT style).

Input: an RL-format window of T consecutive transitions of one stream (crossing episode boundaries): states (B, T)
int64 [or (B, T, D) float32], actions (B, T) int64 [or (B, T, A) float32 for Box actions], rewards (B, T) float32,
timesteps (B, T) int64. Transition t = (s_t, a_t, r_t): a_t was taken in s_t and r_t received after it.

Token layouts (``ADConfig.layout``):

* ``transition``: one token per transition, ``x_t = E_s(s_t) + E_a(a_{t-1}) + E_r(r_{t-1}) + E_time(timestep_t)``;
  the first token of a window uses learned START ids for a_{-1} and r_{-1}.
* ``separate`` (AD paper): three tokens per transition ``[s_t, a_t, r_t]``, each plus ``E_time(timestep_t)``.

Every token carries the embedded in-episode time step (unless ``ADConfig.time_embedding`` is off: then the model
reads no time steps and acts in episodes of any length), so the model knows when an episode is about to reset, and
on request (``ADConfig.position_embedding``) a learned embedding of its position in the window. Box actions
(``ADConfig.action_dim`` > 0) are rescaled to [-1, 1] and embedded by a linear projection (a learned START vector
stands for a_{-1}); their head is a tanh-squashed Gaussian or bins per dimension (:mod:`models.rl.box_actions`).

Heads, all on the final hidden states:

* action: predicts a_t from everything before acting in s_t (the hidden state of the s_t token). A batch with
  ``action_targets`` (B, T) trains it on those instead: the optimal action in s_t (DPT); one with
  ``action_target_probs`` (B, T, A) on those probabilities (cross-entropy with a distribution: DPT's posterior form).
* outcome heads, teacher-forced on the true a_t: reward r_t, next state s_{t+1} and the behaviour policy's
  logprob of a_t, through one small GELU layer on the a_t token's hidden state (separate layout) or on
  ``h_t + E_out(a_t)`` (transition layout). The next-state target is masked where the next row starts a new
  episode (timestep 0): that row is a reset state, not the transition's outcome.

Incremental inference: :class:`KVCache` + :meth:`ADTransformer.transformer` with ``cache=`` appends tokens and
attends over everything cached; its outputs equal the full forward pass over the same tokens (tests check it).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from ad.errors import UserError
from models.rl.box_actions import BoxActions
from models.rl.config import ADConfig


class KVCache:
    """Keys and values of every layer for a batch of token streams that advance together: buffers for ``capacity``
    tokens, ``length`` of them filled."""

    def __init__(self, config: ADConfig, batch_size: int, capacity: int, device=None, dtype=torch.float32):
        hs = config.n_embd // config.n_head
        shape = (config.n_layer, batch_size, config.n_head, capacity, hs)
        self.k = torch.zeros(shape, device=device, dtype=dtype)  # (L, B, nh, capacity, hs)
        self.v = torch.zeros(shape, device=device, dtype=dtype)  # (L, B, nh, capacity, hs)
        self.capacity = capacity
        self.length = 0

    def reset(self) -> None:
        """Forget every cached token (the buffers are reused)."""
        self.length = 0

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the new keys/values (B, nh, Tn, hs) of one layer; return all of them (B, nh, length+Tn, hs)."""
        end = self.length + k.size(2)
        if end > self.capacity:
            raise ValueError(f"KV cache holds {self.capacity} tokens; {end} requested (reset or re-encode first)")
        self.k[layer, :, :, self.length:end] = k
        self.v[layer, :, :, self.length:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ADConfig, layer: int):
        super().__init__()
        self.layer = layer
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = config.attn_dropout
        self.resid_dropout = nn.Dropout(config.resid_dropout)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        past = 0 if cache is None else cache.length
        if cache is not None:
            k, v = cache.update(self.layer, k, v)  # (B, nh, past + T, hs)
        dropout = self.attn_dropout if self.training else 0.0
        if x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # under --precision bf16-mixed: torch's CPU attention kernels are slower in bfloat16 than in float32 at
            # these head widths, where the linear layers around them are much faster in bfloat16
            with torch.autocast("cpu", enabled=False):
                y = self.attend(q.float(), k.float(), v.float(), past, dropout)
        else:
            y = self.attend(q, k, v, past, dropout)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.resid_dropout(self.proj(y))

    @staticmethod
    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past: int, dropout: float) -> torch.Tensor:
        """Causal attention of queries (B, nh, T, hs) at absolute positions past .. past+T-1 over keys and values
        (B, nh, past+T, hs); returns (B, nh, T, hs)."""
        T = q.shape[2]
        if past == 0:  # a fresh sequence: plain causal attention
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        if T == 1:  # one new token sees every cached token
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)
        # new token i (absolute position past + i) sees keys 0 .. past + i
        allowed = torch.ones(T, past + T, dtype=torch.bool, device=q.device).tril(diagonal=past)  # (T, past+T)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout)


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: ADConfig, layer: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config, layer)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, config.n_ff),
            nn.GELU(approximate="tanh"),
            nn.Linear(config.n_ff, config.n_embd),
            nn.Dropout(config.resid_dropout),
        )

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is True (0 when nothing is masked in); same shapes."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def masked_classification(logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean cross-entropy, mean accuracy) where ``mask`` is True of logits (B, T, K) against class ids (B, T)."""
    ce = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none").view_as(mask)  # (B, T)
    return masked_mean(ce, mask), masked_mean((logits.argmax(-1) == target).float(), mask)


def masked_soft_classification(logits: torch.Tensor, probs: torch.Tensor, mask: torch.Tensor
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean cross-entropy, mean target probability of the most likely class) where ``mask`` is True of logits
    (B, T, K) against target distributions ``probs`` (B, T, K); with one-hot ``probs`` these are
    :func:`masked_classification`'s."""
    ce = -(probs * F.log_softmax(logits, dim=-1)).sum(-1)  # (B, T)
    hit = probs.gather(-1, logits.argmax(-1, keepdim=True)).squeeze(-1)  # (B, T)
    return masked_mean(ce, mask), masked_mean(hit, mask)


class ADTransformer(nn.Module):
    """Causal transformer with action / next-state / reward / logprob heads (see the module docstring)."""

    def __init__(self, config: ADConfig):
        super().__init__()
        config.check_complete()
        self.config = config
        C = config.n_embd
        self.discrete_states = config.num_states > 0
        self.discrete_rewards = config.reward_kind == "discrete"
        # --- embeddings; index num_actions / num_rewards is the START id (transition layout, window start)
        self.grid = config.grid_size if self.discrete_states and config.grid_size > 0 else 0
        if self.grid:  # a cell's embedding = its row's + its column's: unseen cells still get a meaningful one
            self.row_emb = nn.Embedding(self.grid, C)
            self.col_emb = nn.Embedding(self.grid, C)
        elif self.discrete_states:
            self.state_emb = nn.Embedding(config.num_states, C)
        else:
            self.state_emb = nn.Linear(config.state_dim, C)
        self.normalize_states = bool(config.normalize_states and config.state_dim)
        if self.normalize_states:  # the training windows' statistics, from the config (not weights: not saved twice)
            self.register_buffer("state_mean", torch.tensor(config.state_mean, dtype=torch.float32), persistent=False)
            self.register_buffer("state_std", torch.tensor(config.state_std, dtype=torch.float32), persistent=False)
        self.pos_emb = nn.Embedding(config.context, C) if config.position_embedding else None
        self.continuous_actions = config.action_dim > 0
        if self.continuous_actions:  # Box actions: a projection of the [-1, 1]-scaled vector; START is a vector
            self.box = BoxActions(config.action_low, config.action_high, config.action_head, config.action_bins)
            self.action_emb = nn.Linear(config.action_dim, C)
            self.action_start = nn.Parameter(torch.zeros(C))
        else:
            self.action_emb = nn.Embedding(config.num_actions + 1, C)
        if self.discrete_rewards:
            self.reward_emb = nn.Embedding(config.num_rewards + 1, C)
        else:
            self.reward_emb = nn.Linear(1, C)
            self.reward_start = nn.Parameter(torch.zeros(C))
        self.time_emb = nn.Embedding(config.episode_length, C) if config.time_embedding else None
        self.drop = nn.Dropout(config.embd_dropout)
        # --- trunk
        self.blocks = nn.ModuleList([Block(config, i) for i in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(C)
        # --- heads
        self.action_head = nn.Linear(C, self.box.head_size if self.continuous_actions else config.num_actions)
        self.has_outcome = max(config.state_weight, config.reward_weight, config.logprob_weight) > 0
        if self.has_outcome:
            if config.layout == "transition" and self.continuous_actions:
                self.outcome_action_emb = nn.Linear(config.action_dim, C)
            elif config.layout == "transition":
                self.outcome_action_emb = nn.Embedding(config.num_actions, C)
            self.outcome = nn.Sequential(nn.Linear(C, C), nn.GELU(approximate="tanh"))
            state_out = config.num_states if self.discrete_states else config.state_dim
            self.state_head = nn.Linear(C, state_out) if config.state_weight > 0 else None
            reward_out = config.num_rewards if self.discrete_rewards else 1
            self.reward_head = nn.Linear(C, reward_out) if config.reward_weight > 0 else None
            self.logprob_head = nn.Linear(C, 1) if config.logprob_weight > 0 else None
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2: scale the residual projections by depth
            if name.endswith("attn.proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    # ------------------------------------------------------------------ tokens
    def _embed_states(self, states: torch.Tensor) -> torch.Tensor:
        if self.grid:
            return self.row_emb(states // self.grid) + self.col_emb(states % self.grid)  # (B, T, C)
        if self.discrete_states:
            return self.state_emb(states)  # (B, T, C)
        if self.normalize_states:
            states = (states.float() - self.state_mean) / self.state_std  # (B, T, D)
        return self.state_emb(states.to(self.state_emb.weight.dtype))  # (B, T, C)

    def _embed_actions(self, actions: torch.Tensor, table: nn.Module) -> torch.Tensor:
        """Actions (B, T) or (B, T, A) -> (B, T, C) through ``table`` (an Embedding, or a Linear on Box actions
        scaled to [-1, 1])."""
        if self.continuous_actions:
            return table(self.box.scale(actions).to(table.weight.dtype))  # (B, T, C)
        return table(actions)  # (B, T, C)

    def _embed_rewards(self, rewards: torch.Tensor) -> torch.Tensor:
        if self.discrete_rewards:
            return self.reward_emb(rewards.round().long())  # (B, T, C)
        return self.reward_emb(rewards.to(self.reward_emb.weight.dtype).unsqueeze(-1))  # (B, T, C)

    def tokens(self, states, actions, rewards, timesteps, start: int = 0) -> torch.Tensor:
        """Token embeddings of a window: (B, T, C) in the transition layout, (B, 3T, C) in the separate one; ``start``
        is the position in the window of the first transition given (for the position embedding)."""
        B, T = actions.shape[:2]
        # (B, T, C) or (T, C), added to every token of a transition; None: neither embedding (the tokens do not depend
        # on the time steps or the positions)
        time = self.time_emb(timesteps) if self.time_emb is not None else None
        if self.pos_emb is not None:
            pos = self.pos_emb(torch.arange(start, start + T, device=timesteps.device))  # (T, C)
            time = pos if time is None else time + pos
        s = self._embed_states(states)  # (B, T, C)
        if self.config.layout == "transition":
            if self.continuous_actions:
                prev_a = torch.cat([self.action_start.expand(B, 1, -1),
                                    self._embed_actions(actions[:, :-1], self.action_emb)], dim=1)  # (B, T, C)
            else:
                start_a = torch.full((B, 1), self.config.num_actions, dtype=actions.dtype, device=actions.device)
                prev_a = self.action_emb(torch.cat([start_a, actions[:, :-1]], dim=1))  # (B, T, C)
            r = self._embed_rewards(rewards[:, :-1])  # (B, T-1, C)
            start_r = self.reward_emb.weight[self.config.num_rewards] if self.discrete_rewards else self.reward_start
            prev_r = torch.cat([start_r.expand(B, 1, -1), r], dim=1)  # (B, T, C)
            x = s + prev_a + prev_r  # (B, T, C)
            if time is not None:
                x = x + time
        else:
            a = self._embed_actions(actions, self.action_emb)  # (B, T, C)
            r = self._embed_rewards(rewards)  # (B, T, C)
            x = torch.stack([s, a, r], dim=2)  # (B, T, 3, C)
            if time is not None:
                x = x + time.unsqueeze(-2)
            x = x.reshape(B, 3 * T, -1)  # (B, 3T, C): s_0, a_0, r_0, s_1, ...
        return self.drop(x)

    def num_tokens(self, n: int, partial: bool = True) -> int:
        """Tokens of n transitions; ``partial``: the last one is only its state (its action is being chosen)."""
        if self.config.layout == "transition":
            return n
        return 3 * n - 2 if partial else 3 * n

    # ------------------------------------------------------------------ trunk
    def transformer(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Run the blocks over tokens (B, Tn, C) -> final-normed hidden states (B, Tn, C); with ``cache`` the tokens are
        appended after the cached ones and attend to them too."""
        for block in self.blocks:
            x = block(x, cache)
        if cache is not None:
            cache.length += x.size(1)
        return self.ln_f(x)

    def new_cache(self, batch_size: int, device=None, dtype=torch.float32) -> KVCache:
        """An empty KV cache that holds one full window per batch row."""
        return KVCache(self.config, batch_size, self.config.max_tokens, device=device, dtype=dtype)

    # ------------------------------------------------------------------ heads
    def forward(self, states, actions, rewards, timesteps) -> dict[str, torch.Tensor]:
        """Head outputs for every transition of the windows: "action" logits (B, T, A) [Box actions: the head's
        parameters, :mod:`models.rl.box_actions`] and, for heads with a weight > 0, "state" (B, T, S or D) = prediction
        of s_{t+1}, "reward" (B, T, R or 1) and "logprob" (B, T), each given the true a_t."""
        h = self.transformer(self.tokens(states, actions, rewards, timesteps))  # (B, L, C)
        if self.config.layout == "transition":
            h_act = h  # (B, T, C)
        else:
            h = h.view(h.size(0), -1, 3, h.size(-1))  # (B, T, 3, C): hidden of the s, a, r tokens
            h_act = h[:, :, 0]  # (B, T, C)
        out = {"action": self.action_head(h_act)}
        if self.has_outcome:
            if self.config.layout == "transition":
                z = self.outcome(h + self._embed_actions(actions, self.outcome_action_emb))  # (B, T, C)
            else:
                z = self.outcome(h[:, :, 1])  # (B, T, C)
            if self.state_head is not None:
                out["state"] = self.state_head(z)
            if self.reward_head is not None:
                out["reward"] = self.reward_head(z)
            if self.logprob_head is not None:
                out["logprob"] = self.logprob_head(z).squeeze(-1)  # (B, T)
        return out

    def compute_loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Weighted sum of the masked head losses of one RL-format batch, and detached metrics."""
        cfg = self.config
        states, actions, rewards, timesteps = batch["states"], batch["actions"], batch["rewards"], batch["timesteps"]
        mask = batch["mask"]  # (B, T) bool, False = padding
        out = self(states, actions, rewards, timesteps)
        metrics: dict[str, torch.Tensor] = {}

        logits = out["action"]  # (B, T, A)
        if self.continuous_actions:  # Box actions: the head's log-likelihood, and its greedy action's error
            nll, sq_error = self.box.loss(logits, actions)  # (B, T) each
            metrics["action_nll"] = masked_mean(nll, mask)
            metrics["action_mse"] = masked_mean(sq_error, mask)
        elif "action_target_probs" in batch:  # (B, T, A): each action's probability of being optimal (DPT)
            metrics["action_nll"], metrics["action_acc"] = masked_soft_classification(
                logits, batch["action_target_probs"], mask)
        else:
            target = batch.get("action_targets", actions)  # (B, T): the optimal actions (DPT), else the actions taken
            metrics["action_nll"], metrics["action_acc"] = masked_classification(logits, target, mask)
        loss = cfg.action_weight * metrics["action_nll"]

        if "reward" in out:
            if self.discrete_rewards:
                metrics["reward_loss"], metrics["reward_acc"] = masked_classification(out["reward"],
                                                                                      rewards.round().long(), mask)
            else:
                metrics["reward_loss"] = masked_mean((out["reward"].squeeze(-1) - rewards) ** 2, mask)
            loss = loss + cfg.reward_weight * metrics["reward_loss"]

        if "state" in out:
            # s_{t+1} is the next row unless that row starts a new episode (a reset state) or is padding
            valid = mask[:, 1:] & mask[:, :-1] & (timesteps[:, 1:] != 0)  # (B, T-1)
            pred = out["state"][:, :-1]  # (B, T-1, S or D)
            if self.discrete_states:
                metrics["state_loss"], metrics["state_acc"] = masked_classification(pred, states[:, 1:], valid)
            else:
                se = ((pred - states[:, 1:].float()) ** 2).mean(-1)  # (B, T-1)
                metrics["state_loss"] = masked_mean(se, valid)
            loss = loss + cfg.state_weight * metrics["state_loss"]

        if "logprob" in out:
            metrics["logprob_loss"] = masked_mean((out["logprob"] - batch["logprobs"]) ** 2, mask)
            loss = loss + cfg.logprob_weight * metrics["logprob_loss"]

        metrics["loss"] = loss
        return loss, {k: v.detach() for k, v in metrics.items()}

    # ------------------------------------------------------------------ save / load
    def save_pretrained(self, directory: str | Path) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``directory``."""
        from dataclasses import asdict

        from safetensors.torch import save_file

        from ad.files import atomic_path, write_json_atomic

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        write_json_atomic(directory / "config.json", {"model_type": "ad-rl", **asdict(self.config)})
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        with atomic_path(directory / "model.safetensors") as tmp:
            save_file(state, str(tmp))
        return directory

    @classmethod
    def from_pretrained(cls, directory: str | Path, map_location: str | torch.device = "cpu") -> "ADTransformer":
        """Load a model written by :meth:`save_pretrained`; a UserError says what is wrong with the folder."""
        from safetensors.torch import load_file

        directory = Path(directory)
        config_file, weights_file = directory / "config.json", directory / "model.safetensors"
        if not config_file.is_file() or not weights_file.is_file():
            raise UserError(f"{directory} is not a saved AD model: it needs config.json and model.safetensors "
                            "(written by `ad train rl` into <out>/model)")
        try:
            values = json.loads(config_file.read_text())
            values.pop("model_type", None)
            config = ADConfig(**values)
        except (ValueError, TypeError) as err:
            raise UserError(f"{config_file} is not a valid AD model config: {err}") from None
        model = cls(config)
        try:
            state = load_file(str(weights_file), device=str(map_location))
            model.load_state_dict(state)
        except Exception as err:  # noqa: BLE001 - a corrupt or mismatched weights file is the user's to fix
            raise UserError(f"cannot load weights {weights_file}: {err}") from None
        return model
