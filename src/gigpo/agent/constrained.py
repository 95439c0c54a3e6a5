"""Constrained action decoding: a token trie over the admissible actions, and the per-token allowed sets.

At every generated token the policy may only emit tokens that continue at least one admissible action's token
sequence (grounded decoding, as in GLAM; vLLM's guided "choice"). The sequence ends when an action is complete
and EOS (``plain``) or the closing ``</action>`` tag (``think-action``) is emitted, or at once when the action is
complete and nothing longer continues it (the only allowed token would be EOS, probability 1: skipping it
changes no log-prob).

Each action contributes its tokenisation ``encode(a)`` and, when different, ``encode(" " + a)`` (BPE vocabularies
have leading-space variants of words; WordPiece/SentencePiece ones usually give the same ids, deduplicated).
An action that is a prefix of another is a terminal inner node: there EOS/``</action>`` *and* the longer action's
next tokens are allowed.

Token budget: the sampler passes the tokens left (``max_response_tokens`` minus those emitted) and a child is
offered only if some action completes within them (each node knows its fewest tokens to an action), so a short
budget never starts a longer spelling it would cut into an invalid response (e.g. " up" = [" ", "up"] with one
token left). The sets recorded for the learner are these filtered ones.

``think-action``: tokens are free until the decoded response contains ``<action>``; then the trie applies; after a
complete action the ``</action>`` tag's tokens are forced one by one and generation stops.

Distribution contract (sampler and learner alike; :mod:`gigpo.rollout.engine`, :mod:`gigpo.train.logprobs`):
at a constrained position with allowed set A,

    log π(y | ·) = log_softmax_{v ∈ A}(z_v / T)          (z: the model's logits, T: temperature; −inf outside A)

i.e. temperature scaling, then masking, then renormalisation over A; top-p (if < 1) is applied after that to the
masked distribution by the sampler only, as in free decoding. Free positions use log_softmax(z / T). The sampler
records, per response token, the allowed set it used (``None`` = free) and the learner applies exactly those
sets, so the PPO ratio compares the distribution that was sampled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OPEN_TAG, CLOSE_TAG = "<action>", "</action>"


class ActionEncodingError(ValueError):
    """An admissible action the tokenizer cannot encode faithfully (empty, unknown token, lossy round trip)."""


def _squash(text: str) -> str:
    return "".join(text.split()).lower()


def encode_action(tokenizer: Any, action: str, env_name: str = "env") -> list[list[int]]:
    """The distinct token sequences of ``action`` (as is, and with a leading space); ActionEncodingError naming
    the env and the action when no faithful one exists (decoding must give the action back, up to whitespace and
    case — what :func:`gigpo.agent.parse.parse_response` ignores)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    out: list[list[int]] = []
    for text in (action, " " + action):
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        if not ids or (unk is not None and unk in ids):
            continue
        if _squash(tokenizer.decode(ids, skip_special_tokens=True)) != _squash(action):
            continue
        if ids not in out:
            out.append(ids)
    if not action.strip() or not out:
        raise ActionEncodingError(
            f"env {env_name!r}: admissible action {action!r} cannot be encoded by the model's tokenizer (empty, "
            "unknown token or lossy round trip), so rollout.decoding=constrained cannot emit it; use "
            "rollout.decoding=free or a tokenizer that covers the env's actions")
    return out


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    action: str | None = None  #: the action completed at this node (None: inner node only)
    to_action: int = 0  #: fewest further tokens from here to a node that completes an action


class ActionTrie:
    """Token trie of the admissible actions (first spelling wins when two actions tokenise identically)."""

    def __init__(self, tokenizer: Any, actions: list[str], env_name: str = "env"):
        if not actions:
            raise ActionEncodingError(f"env {env_name!r} gave no admissible actions; rollout.decoding=constrained "
                                      "needs them at every step")
        self.actions = list(actions)
        self.root = _Node()
        for a in actions:
            for seq in encode_action(tokenizer, a, env_name):
                node = self.root
                for tok in seq:
                    node = node.children.setdefault(tok, _Node())
                if node.action is None:
                    node.action = a
        self._set_to_action(self.root)

    @staticmethod
    def _set_to_action(root: _Node) -> None:
        order, stack = [], [root]
        while stack:  # iterative pre-order; reversed, every child comes before its parent
            node = stack.pop()
            order.append(node)
            stack.extend(node.children.values())
        for node in reversed(order):
            node.to_action = 0 if node.action is not None else 1 + min(c.to_action for c in node.children.values())

    def max_depth(self) -> int:
        """Tokens of the longest path from the root to a leaf: a budget that always completes an action (a
        shorter action on the way ends at its EOS within it, or counts as chosen when cut there)."""
        deepest, stack = 0, [(self.root, 0)]
        while stack:
            node, d = stack.pop()
            deepest = max(deepest, d)
            stack.extend((c, d + 1) for c in node.children.values())
        return deepest


class DecodeState:
    """Where one response is in the constraint's automaton; a pure function of the tokens fed to it."""

    __slots__ = ("phase", "node", "close_pos", "tokens", "action")

    def __init__(self, phase: str, node: _Node):
        self.phase = phase  # "free" | "action" | "close" | "done"
        self.node = node
        self.close_pos = 0
        self.tokens: list[int] = []
        self.action: str | None = None

    @property
    def done(self) -> bool:
        return self.phase == "done"


class ActionConstraint:
    """The allowed-token automaton of one step: ``start()``, then ``allowed(state)`` (a list of token ids, or
    None where decoding is free) and ``advance(state, token)`` per generated token; ``finish(state)`` at the
    token budget. ``state.action`` is the chosen action (env spelling) once one is complete."""

    def __init__(self, tokenizer: Any, actions: list[str], *, eos_ids: list[int], fmt: str = "plain",
                 env_name: str = "env", trie: ActionTrie | None = None):
        if fmt not in ("plain", "think-action"):
            raise ValueError(f"unknown response format {fmt!r}")
        self.tokenizer, self.fmt = tokenizer, fmt
        self.eos_ids = list(eos_ids)
        self.trie = trie or ActionTrie(tokenizer, actions, env_name)
        self.close_ids = list(tokenizer(CLOSE_TAG, add_special_tokens=False)["input_ids"]) if fmt != "plain" else []

    def start(self) -> DecodeState:
        return DecodeState("action" if self.fmt == "plain" else "free", self.trie.root)

    def allowed(self, s: DecodeState, remaining: int | None = None) -> list[int] | None:
        """Allowed next tokens; ``remaining`` = tokens left in the budget, this one included (None: unbounded).

        With a budget, a child is offered only if an action can still be completed within it
        (1 + child.to_action ≤ remaining): a leading-space spelling that takes one token more than the plain one
        must not be started when only one token is left (it would be cut into an invalid response). If no child
        fits, all are offered (the budget is shorter than every action here; the response will be cut)."""
        if s.phase == "free":
            return None
        if s.phase == "close":
            return [self.close_ids[s.close_pos]]
        ends = (self.eos_ids if self.fmt == "plain" else self.close_ids[:1]) if s.node.action is not None else []
        kids = list(s.node.children)
        if remaining is not None:
            fits = [t for t in kids if 1 + s.node.children[t].to_action <= remaining]
            kids = fits if fits or ends else kids
        return kids + [t for t in ends if t not in s.node.children]

    def advance(self, s: DecodeState, token: int) -> None:
        s.tokens.append(token)
        if s.phase == "free":
            if token in self.eos_ids:
                s.phase = "done"
                return
            text = self.tokenizer.decode(s.tokens, skip_special_tokens=True)
            at = text.lower().find(OPEN_TAG)
            if at >= 0:  # the tag's token may run on: only whitespace may follow it inside that token
                s.phase = "action" if not text[at + len(OPEN_TAG):].strip() else "done"
            return
        if s.phase == "close":
            s.close_pos += 1
            if s.close_pos >= len(self.close_ids):
                s.phase = "done"
            return
        child = s.node.children.get(token)
        if child is None:  # an end token after a complete action (allowed() offered nothing else)
            s.action = s.node.action
            if self.fmt == "plain" or len(self.close_ids) == 1:
                s.phase = "done"
            else:
                s.phase, s.close_pos = "close", 1
            return
        s.node = child
        if not child.children and child.action is not None and self.fmt == "plain":
            s.action, s.phase = child.action, "done"  # only EOS could follow: stop here

    def finish(self, s: DecodeState) -> str | None:
        """The action of a response cut at the token budget: complete actions count, partial ones do not."""
        if s.action is None and s.phase in ("action", "close") and s.node.action is not None:
            s.action = s.node.action
        return s.action


class ConstraintCache:
    """Builds :class:`ActionConstraint` objects, reusing tries for admissible lists seen before (bounded)."""

    def __init__(self, tokenizer: Any, eos_ids: list[int], fmt: str, env_name: str = "env", size: int = 4096):
        self.tokenizer, self.eos_ids, self.fmt, self.env_name, self.size = tokenizer, eos_ids, fmt, env_name, size
        self._tries: dict[tuple[str, ...], ActionTrie] = {}

    def get(self, actions: list[str] | None) -> ActionConstraint:
        if not actions:
            raise ActionEncodingError(f"env {self.env_name!r} gave no admissible actions at this step; "
                                      "rollout.decoding=constrained needs them at every step")
        key = tuple(actions)
        trie = self._tries.get(key)
        if trie is None:
            if len(self._tries) >= self.size:
                self._tries.clear()
            trie = self._tries[key] = ActionTrie(self.tokenizer, list(actions), self.env_name)
        return ActionConstraint(self.tokenizer, list(actions), eos_ids=self.eos_ids, fmt=self.fmt,
                                env_name=self.env_name, trie=trie)
