"""Language format: windows of a learning history serialised as text, and parsed back.

A template turns rows into *segments* ``(text, is_action)``. Tokenising segment
by segment gives exact action-token labels for training, and the acting code
uses the same segments, so the text an LM is trained on and acts on agree.
Templates are looked up by name in :data:`TEMPLATES`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ad.errors import UserError

Segment = tuple[str, bool]  # (text, is the action)


def _fmt_reward(value: float) -> str:
    return f"{float(value):.4f}".rstrip("0").rstrip(".") if float(value) != int(value) else str(int(value))


class Template:
    """Base class: serialise rows of a history to text segments and parse actions back."""

    name = "base"
    #: a model trained from scratch reads this template's text one character a token (else one word a token)
    character_level = False

    def segments(self, rows: dict[str, Sequence[Any]]) -> list[Segment]:
        """Segments for rows (columns: state, action, reward, step ...), in order."""
        return [segment for i in range(len(rows["action"]))
                for segment in self.row_segments({k: v[i] for k, v in rows.items()})]

    def row_segments(self, row: dict[str, Any]) -> list[Segment]:  # pragma: no cover - abstract
        raise NotImplementedError

    def prompt(self, row: dict[str, Any]) -> str:
        """Text that precedes the action of ``row`` (everything before the action segment)."""
        text = ""
        for segment, is_action in self.row_segments(row):
            if is_action:
                return text
            text += segment
        raise AssertionError("template has no action segment")

    def render(self, rows: dict[str, Sequence[Any]]) -> str:
        return "".join(text for text, _ in self.segments(rows))

    def action_text(self, action: Any) -> str:
        return str(action)

    def parse(self, text: str) -> list[dict[str, Any]]:  # pragma: no cover - abstract
        """Rows (state, action, reward) recovered from rendered text."""
        raise NotImplementedError

    def parse_action(self, text: str) -> Any:  # pragma: no cover - abstract
        """The action at the start of generated text; raises ValueError if there is none."""
        raise NotImplementedError


class CompactTemplate(Template):
    """Small discrete envs: one line per transition, ``s40 a2 r0``; a ``|`` line starts each episode."""

    name = "compact"
    _row = re.compile(r"s(-?\d+) a(-?\d+) r(-?[\d.]+)")

    def row_segments(self, row: dict[str, Any]) -> list[Segment]:
        head = "|\n" if int(row.get("step", 1)) == 0 else ""
        return [(f"{head}s{int(row['state'])} a", False), (str(int(row["action"])), True),
                (f" r{_fmt_reward(row['reward'])}\n", False)]

    def parse(self, text: str) -> list[dict[str, Any]]:
        return [{"state": int(s), "action": int(a), "reward": float(r)} for s, a, r in self._row.findall(text)]

    def parse_action(self, text: str) -> int:
        match = re.match(r"\s*(\d+)", text)
        if not match:
            raise ValueError(f"no action number at the start of {text[:20]!r}")
        return int(match.group(1))


class WordTemplate(CompactTemplate):
    """Small discrete envs for a word-level tokenizer: ``s40 a2 r0`` with one word per field, ``|`` before each
    episode, so a transition is 3 tokens (4 at an episode start) of a vocabulary built from the template itself
    (:meth:`vocabulary`; :func:`models.lm.vocab.word_tokenizer`)."""

    name = "words"
    boundary = "|"

    def row_segments(self, row: dict[str, Any]) -> list[Segment]:
        head = f"{self.boundary} " if int(row.get("step", 1)) == 0 else ""
        return [(f"{head}s{int(row['state'])} ", False), (self.action_text(row["action"]), True),
                (f" r{_fmt_reward(row['reward'])}\n", False)]

    def action_text(self, action: Any) -> str:
        return f"a{int(action)}"

    def vocabulary(self, num_states: int, num_actions: int, rewards: Sequence[float]) -> list[str]:
        """Every word this template writes for ``num_states`` states, ``num_actions`` actions and these rewards."""
        return ([self.boundary] + [f"s{s}" for s in range(num_states)] + [f"a{a}" for a in range(num_actions)]
                + sorted({f"r{_fmt_reward(r)}" for r in rewards}))

    def parse_action(self, text: str) -> int:
        match = re.match(r"\s*a(\d+)", text)
        if not match:
            raise ValueError(f"no action word (a<number>) at the start of {text[:20]!r}")
        return int(match.group(1))


class GridWordTemplate(WordTemplate):
    """The ``words`` template for states that are the cells of an ``size`` x ``size`` grid (DarkRoom): a state is
    written as its row and column, ``x3 y7 a2 r0`` (4 tokens a transition, 5 at an episode start), so a model can
    compose a cell it never saw as a goal from a row and a column it knows. Named ``grid<size>`` (``grid9``)."""

    def __init__(self, size: int):
        if size < 1:
            raise UserError(f"a grid template needs a positive size, got {size}")
        self.size = size
        self.name = f"grid{size}"
        self._row = re.compile(r"x(\d+) y(\d+) a(-?\d+) r(-?[\d.]+)")

    def row_segments(self, row: dict[str, Any]) -> list[Segment]:
        head = f"{self.boundary} " if int(row.get("step", 1)) == 0 else ""
        state = int(row["state"])
        return [(f"{head}x{state // self.size} y{state % self.size} ", False), (self.action_text(row["action"]), True),
                (f" r{_fmt_reward(row['reward'])}\n", False)]

    def vocabulary(self, num_states: int, num_actions: int, rewards: Sequence[float]) -> list[str]:
        if num_states != self.size ** 2:
            raise UserError(f"template {self.name} writes the cells of a {self.size}x{self.size} grid but the dataset "
                            f"has {num_states} states; use --template words")
        return ([self.boundary] + [f"x{i}" for i in range(self.size)] + [f"y{i}" for i in range(self.size)]
                + [f"a{a}" for a in range(num_actions)] + sorted({f"r{_fmt_reward(r)}" for r in rewards}))

    def parse(self, text: str) -> list[dict[str, Any]]:
        return [{"state": int(x) * self.size + int(y), "action": int(a), "reward": float(r)}
                for x, y, a, r in self._row.findall(text)]


class RolloutTemplate(Template):
    """Seed 001's prompt/completion rollouts: ``prompt: ...\\ncompletion: ...\\nreward: 0.9975\\n###\\n``."""

    name = "rollout"
    _block = re.compile(r"prompt: (.*?)\ncompletion: (.*?)\nreward: (-?[\d.eE+-]+|nan)\n###\n?", re.S)

    def row_segments(self, row: dict[str, Any]) -> list[Segment]:
        return [(f"prompt: {row['state']}\ncompletion: ", False), (str(row["action"]), True),
                (f"\nreward: {float(row['reward']):.4f}\n###\n", False)]

    def parse(self, text: str) -> list[dict[str, Any]]:
        return [{"state": p, "action": c, "reward": float(r)} for p, c, r in self._block.findall(text)]

    def parse_action(self, text: str) -> str:
        end = text.find("\nreward:")
        if end < 0:
            end = text.find("\n###")
        return text if end < 0 else text[:end]


class VectorTemplate(Template):
    """Box states and actions as fixed-width rounded numbers, one line per transition:
    ``s +0.12 -0.53 +1.00 a -1.25 r -3.21`` (``decimals`` places, signed), a ``|`` line before each episode;
    discrete values are written as integers. Parsing gives the rounded values back as float32 arrays."""

    name = "vector"
    _row = re.compile(r"s ([^\n]*?) a ([^\n]*?) r (\S+)")

    def __init__(self, decimals: int = 2) -> None:
        self.decimals = decimals

    def numbers(self, value: Any) -> str:
        """``value`` (a number or a vector) as space-separated fixed-width numbers."""
        values = np.asarray(value).reshape(-1)
        if values.dtype.kind in "iub":
            return " ".join(str(int(v)) for v in values)
        return " ".join(f"{float(v):+.{self.decimals}f}" for v in values)

    def row_segments(self, row: dict[str, Any]) -> list[Segment]:
        head = "|\n" if int(row.get("step", 1)) == 0 else ""
        return [(f"{head}s {self.numbers(row['state'])} a ", False), (self.action_text(row["action"]), True),
                (f" r {float(row['reward']):+.{self.decimals}f}\n", False)]

    def action_text(self, action: Any) -> str:
        return self.numbers(action)

    def parse(self, text: str) -> list[dict[str, Any]]:
        return [{"state": _floats(s), "action": _floats(a), "reward": float(r)} for s, a, r in self._row.findall(text)]

    character_level = True  # spaces are separators only

    def box_vocabulary(self, state_dim: int, num_actions: int) -> list[str]:
        """The characters this template writes (any state size, any number of discrete actions)."""
        return list(VECTOR_CHARACTERS)

    def parse_action(self, text: str) -> np.ndarray:
        match = re.match(r"\s*((?:[+-]?\d+(?:\.\d+)?\s?)+)", text)
        if not match:
            raise ValueError(f"no action numbers at the start of {text[:20]!r}")
        return _floats(match.group(1))


def _floats(text: str) -> np.ndarray:
    return np.asarray([float(v) for v in text.split()], dtype=np.float32)


def log_bin_edges(levels: int, low: float, high: float) -> np.ndarray:
    """The ``levels`` magnitude edges of :func:`log_bins`, geometric from ``low`` to ``high``: (levels,)."""
    return np.geomspace(low, high, levels)


def log_bins(values: Any, edges: np.ndarray) -> np.ndarray:
    """Signed bin index of each value, in ``-len(edges) .. len(edges)``: 0 for ``|v| < edges[0]``, ``+-k`` for
    ``edges[k-1] <= |v| < edges[k]``, ``+-len(edges)`` at or beyond the last edge (symmetric log bins: fine near 0,
    coarse far out, the same for every dimension). Non-finite values raise ``ValueError``."""
    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        raise ValueError(f"non-finite value among {v.reshape(-1)[:8].tolist()}")
    return (np.sign(v) * np.searchsorted(edges, np.abs(v), side="right")).astype(np.int64)


def log_bin_values(bins: Any, edges: np.ndarray) -> np.ndarray:
    """A representative value of each signed bin (the geometric middle of its edges; 0 for bin 0)."""
    b = np.asarray(bins, dtype=np.int64)
    mags = np.concatenate([[0.0], np.sqrt(edges[:-1] * edges[1:]), [edges[-1]]])
    return (np.sign(b) * mags[np.abs(b)]).astype(np.float32)


class BoxWordTemplate(WordTemplate):
    """Base of the word templates for Box states (LunarLander's 8 numbers): states written as binned words, a
    discrete action as ``a<k>`` and the reward as one binned word ``r<bin>``, ``|`` before each episode. Bins are
    symmetric log bins (:func:`log_bins`): ``levels`` magnitudes per sign from ``low`` to ``high`` for states, from
    ``reward_low`` to ``reward_high`` for rewards. A model trained from scratch reads them through the word tokenizer
    of :meth:`box_vocabulary`."""

    reward_low, reward_high = 0.01, 100.0

    def __init__(self, levels: int, low: float = 0.01, high: float = 10.0) -> None:
        if levels < 1:
            raise UserError(f"template {type(self).__name__} needs at least 1 bin level, got {levels}")
        self.levels = levels
        self.edges = log_bin_edges(levels, low, high)
        self.reward_edges = log_bin_edges(levels, self.reward_low, self.reward_high)

    def state_words(self, state: Any) -> list[str]:  # pragma: no cover - abstract
        """The words of one state (a Box vector)."""
        raise NotImplementedError

    def row_segments(self, row: dict[str, Any]) -> list[Segment]:
        head = f"{self.boundary} " if int(row.get("step", 1)) == 0 else ""
        reward = int(log_bins(float(row["reward"]), self.reward_edges))
        return [(f"{head}{' '.join(self.state_words(row['state']))} ", False), (self.action_text(row["action"]), True),
                (f" r{reward:+d}\n", False)]

    def word_bins(self, word: str) -> list[int]:  # pragma: no cover - abstract
        """The signed bins one state word holds."""
        raise NotImplementedError

    def parse(self, text: str) -> list[dict[str, Any]]:
        """Rows whose state and reward are their bins' representative values (:func:`log_bin_values`); a pair of
        an odd last dimension gives its value twice."""
        rows = []
        for line in text.splitlines():
            words = [w for w in line.split() if w != self.boundary]
            if len(words) < 3:
                continue
            dims = [b for w in words[:-2] for b in self.word_bins(w)]
            rows.append({"state": log_bin_values(dims, self.edges), "action": int(words[-2][1:]),
                         "reward": float(log_bin_values(int(words[-1][1:]), self.reward_edges))})
        return rows

    def bin_words(self) -> list[str]:
        """Every signed bin as text: ``-L .. +L``."""
        return [f"{b:+d}" for b in range(-self.levels, self.levels + 1)]

    def box_vocabulary(self, state_dim: int, num_actions: int) -> list[str]:  # pragma: no cover - abstract
        """Every word this template writes for ``state_dim`` numbers per state and ``num_actions`` actions."""
        raise NotImplementedError

    def vocabulary(self, num_states: int, num_actions: int, rewards: Sequence[float]) -> list[str]:
        """Refused: this template writes Box states, not the numbered states of a discrete dataset."""
        raise UserError(f"template {self.name} writes Box (vector) states but the dataset has {num_states} discrete "
                        "states; use --template words or grid<N>")


class BinTemplate(BoxWordTemplate):
    """Box states as one binned word per dimension, ``d0+3 d1-2 ... d7+0 a2 r-1`` (``state_dim + 2`` tokens a
    transition): dimension ``i`` in signed log bin ``b`` is the word ``d<i><b>``. Named ``bins<levels>``."""

    def __init__(self, levels: int) -> None:
        super().__init__(levels)
        self.name = f"bins{levels}"

    def state_words(self, state: Any) -> list[str]:
        return [f"d{i}{b:+d}" for i, b in enumerate(log_bins(np.asarray(state).reshape(-1), self.edges))]

    def box_vocabulary(self, state_dim: int, num_actions: int) -> list[str]:
        return ([self.boundary] + [f"d{i}{b}" for i in range(state_dim) for b in self.bin_words()]
                + [f"a{a}" for a in range(num_actions)] + [f"r{b}" for b in self.bin_words()])

    def word_bins(self, word: str) -> list[int]:
        return [int(re.search(r"[+-]\d+$", word).group())]


class PairTemplate(BoxWordTemplate):
    """Box states as one word per *pair* of consecutive dimensions, both binned, ``p0+3-2 p1+0+1 ... a2 r-1``
    (LunarLander: position, velocity, angle and angular velocity, the two legs: ``state_dim / 2 + 2`` tokens a
    transition); an odd last dimension is a pair with itself. Named ``pairs<levels>``."""

    def __init__(self, levels: int) -> None:
        super().__init__(levels)
        self.name = f"pairs{levels}"

    def state_words(self, state: Any) -> list[str]:
        b = log_bins(np.asarray(state).reshape(-1), self.edges)
        return [f"p{j}{b[2 * j]:+d}{b[min(2 * j + 1, len(b) - 1)]:+d}" for j in range((len(b) + 1) // 2)]

    def box_vocabulary(self, state_dim: int, num_actions: int) -> list[str]:
        bins = self.bin_words()
        return ([self.boundary] + [f"p{j}{x}{y}" for j in range((state_dim + 1) // 2) for x in bins for y in bins]
                + [f"a{a}" for a in range(num_actions)] + [f"r{b}" for b in bins])

    def word_bins(self, word: str) -> list[int]:
        return [int(v) for v in re.findall(r"[+-]\d+", word)]


#: characters of the ``vector`` template's text (a model trained from scratch reads it one character a token)
VECTOR_CHARACTERS = tuple("|sar+-.0123456789")


TEMPLATES: dict[str, Template] = {t.name: t for t in (CompactTemplate(), WordTemplate(), RolloutTemplate(),
                                                      VectorTemplate())}
#: parameterised template names: pattern -> factory of the template of a matching name
FACTORIES = {r"grid(\d+)": lambda n: GridWordTemplate(int(n)), r"bins(\d+)": lambda n: BinTemplate(int(n)),
             r"pairs(\d+)": lambda n: PairTemplate(int(n))}


def get_template(name: str) -> Template:
    """Look a template up by name (UserError listing the known ones); ``grid<N>`` makes an N x N grid template,
    ``bins<L>`` / ``pairs<L>`` Box-state templates of L log-bin levels per sign."""
    for pattern, factory in FACTORIES.items():
        match = re.fullmatch(pattern, name)
        if match and name not in TEMPLATES:
            register_template(factory(match.group(1)))
    if name not in TEMPLATES:
        raise UserError(f"unknown template {name!r}; known templates: {', '.join(sorted(TEMPLATES))}, grid<N> "
                        "(an N x N grid), bins<L> and pairs<L> (Box states in L log-bin levels)")
    return TEMPLATES[name]


def register_template(template: Template) -> None:
    """Add a task's own template to the registry."""
    TEMPLATES[template.name] = template


@dataclass
class TokenizedText:
    """Token ids of rendered segments and a mask of the action tokens."""

    input_ids: np.ndarray  # (L,) int64
    action_mask: np.ndarray  # (L,) bool


def tokenize_segments(tokenizer: Any, segments: Sequence[Segment]) -> TokenizedText:
    """Tokenise segment by segment (no special tokens) so action tokens are known exactly."""
    texts = [text for text, _ in segments]
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    ids = [token for piece in encoded for token in piece]
    mask = [is_action for (_, is_action), piece in zip(segments, encoded) for _ in piece]
    return TokenizedText(np.asarray(ids, dtype=np.int64), np.asarray(mask, dtype=bool))
