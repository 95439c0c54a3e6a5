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

Free-text slots (``slots=True``, what rollout uses; the server's ``guided_choice`` keeps every choice literal): an
admissible action of the form ``name[<placeholder>]`` — WebShop's ``search[<your query>]`` — is a template, not a
string to copy. Its prefix ``name[`` is a trie path; then any number of *slot tokens* may follow (the vocabulary's
tokens whose text is printable ASCII without ``[ ] < >`` or line breaks, specials excluded), and the closing
``]`` is offered once the slot holds a letter or digit, and forced when the budget has room for it only. The
action is ``name[`` + the slot's decoded text, stripped + ``]``. The slot's allowed set is one shared list,
recorded like any other (``None`` stays "free": a slot is a constrained position).

``think-action``: tokens are free until the decoded response contains ``<action>``; then the trie applies; after a
complete action the ``</action>`` tag's tokens are forced one by one and generation stops.

Distribution contract (sampler and learner alike; :mod:`gigpo.rollout.sampling`, :mod:`gigpo.train.update.logprobs`):
at a constrained position with allowed set A,

    log π(y | ·) = log_softmax_{v ∈ A}(z_v / T)          (z: the model's logits, T: temperature; −inf outside A)

i.e. temperature scaling, then masking, then renormalisation over A; top-p (if < 1) is applied after that to the
masked distribution by the sampler only, as in free decoding. Free positions use log_softmax(z / T). The sampler
records, per response token, the allowed set it used (``None`` = free) and the learner applies exactly those
sets, so the PPO ratio compares the distribution that was sampled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

OPEN_TAG, CLOSE_TAG = "<action>", "</action>"
#: An admissible action that is a free-text template: ``name[<placeholder>]`` (the whole argument a placeholder).
TEMPLATE = re.compile(r"(\w+\[)<[^<>\[\]]*\w[^<>\[\]]*>(\])")
_SLOT_BANNED = set("[]<>")


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


def slot_vocabulary(tokenizer: Any) -> list[int]:
    """Ids a free-text slot may emit: tokens that decode to non-empty printable ASCII with no ``[ ] < >`` and no
    line break or tab, special tokens excluded (so a slot never closes, nests or ends the response by itself).

    Each token is decoded after a context token and judged by the text it adds: decoded alone, SentencePiece's
    word-start piece "▁" is "" and "▁cl" is "cl" (the leading space is dropped at the start of a text)."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    ids = [i for i in range(len(tokenizer)) if i not in special]
    ctx = list(tokenizer("x", add_special_tokens=False)["input_ids"])
    head = tokenizer.decode(ctx, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    texts = tokenizer.batch_decode([ctx + [i] for i in ids], skip_special_tokens=True,
                                   clean_up_tokenization_spaces=False)
    added = [t[len(head):] if t.startswith(head) else "\ufffd" for t in texts]
    return [i for i, t in zip(ids, added)
            if t and all(32 <= ord(ch) < 127 for ch in t) and not _SLOT_BANNED.intersection(t)]


def _suffix_ids(tokenizer: Any, suffix: str, action: str, env_name: str) -> list[int]:
    """The tokens of ``suffix`` as written right after a word (SentencePiece encodes a text-initial "]" as the
    word-start piece "▁" then "]": that "▁" is a slot token, a space, and must not be what closes the slot)."""
    ctx = list(tokenizer("x", add_special_tokens=False)["input_ids"])
    ids = list(tokenizer("x" + suffix, add_special_tokens=False)["input_ids"])
    if ids[:len(ctx)] == ctx and len(ids) > len(ctx):
        return ids[len(ctx):]
    single = tokenizer.convert_tokens_to_ids(suffix)
    if isinstance(single, int) and single != getattr(tokenizer, "unk_token_id", None):
        return [single]
    raise ActionEncodingError(f"env {env_name!r}: the closing {suffix!r} of template {action!r} has no token of "
                              "its own after a word in this tokenizer, so its free-text slot cannot be closed")


@dataclass
class _Slot:
    """A template's free-text part, hanging off the node where its prefix ends."""

    prefix: str  #: env spelling up to and including ``[``
    suffix: str  #: ``]``
    suffix_ids: list[int]


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    action: str | None = None  #: the action completed at this node (None: inner node only)
    to_action: int = 0  #: fewest further tokens from here to a node that completes an action
    slot: _Slot | None = None  #: a free-text slot starts after this node


class ActionTrie:
    """Token trie of the admissible actions (first spelling wins when two actions tokenise identically);
    with ``slot_ids``, ``name[<placeholder>]`` actions become free-text slots (module docstring)."""

    def __init__(self, tokenizer: Any, actions: list[str], env_name: str = "env",
                 slot_ids: list[int] | None = None, open_cache: dict[int, list[int]] | None = None):
        if not actions:
            raise ActionEncodingError(f"env {env_name!r} gave no admissible actions; rollout.decoding=constrained "
                                      "needs them at every step")
        self.actions = list(actions)
        self.slot_ids = slot_ids
        self._open: dict[int, list[int]] = {} if open_cache is None else open_cache  # shared across a cache's tries
        self.root = _Node()
        for a in actions:
            m = TEMPLATE.fullmatch(a) if slot_ids is not None else None
            text = m.group(1) if m else a
            for seq in encode_action(tokenizer, text, env_name):
                node = self.root
                for tok in seq:
                    node = node.children.setdefault(tok, _Node())
                if m and node.slot is None:
                    node.slot = _Slot(m.group(1), m.group(2), _suffix_ids(tokenizer, m.group(2), a, env_name))
                elif not m and node.action is None:
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
            # a slot finishes in one slot token plus its suffix
            ways = [1 + c.to_action for c in node.children.values()]
            ways += [1 + len(node.slot.suffix_ids)] if node.slot is not None else []
            node.to_action = 0 if node.action is not None else min(ways)

    def open_slot_ids(self, close: int) -> list[int]:
        """The slot's ids plus its closing token: one list per trie, shared by every row that records it."""
        if close not in self._open:
            assert self.slot_ids is not None
            self._open[close] = self.slot_ids + ([close] if close not in self.slot_ids else [])
        return self._open[close]

    def max_depth(self) -> int:
        """Tokens of the longest path from the root to a leaf: a budget that always completes an action (a
        shorter action on the way ends at its EOS within it, or counts as chosen when cut there; a slot counts
        its shortest text, one token, plus its suffix)."""
        deepest, stack = 0, [(self.root, 0)]
        while stack:
            node, d = stack.pop()
            deepest = max(deepest, d + (node.to_action if node.slot is not None else 0))
            stack.extend((c, d + 1) for c in node.children.values())
        return deepest


class DecodeState:
    """Where one response is in the constraint's automaton; a pure function of the tokens fed to it."""

    __slots__ = ("phase", "node", "close_pos", "tokens", "action", "slot", "slot_tokens", "slot_word", "suffix_pos")

    def __init__(self, phase: str, node: _Node):
        self.phase = phase  # "free" | "action" | "slot" | "suffix" | "close" | "done"
        self.node = node
        self.close_pos = 0
        self.tokens: list[int] = []
        self.action: str | None = None
        self.slot: _Slot | None = None  #: the free-text slot being written (phases "slot", "suffix")
        self.slot_tokens: list[int] = []
        self.slot_word = False  #: the slot holds a letter or digit (only then may it close)
        self.suffix_pos = 0

    @property
    def done(self) -> bool:
        return self.phase == "done"


class ActionConstraint:
    """The allowed-token automaton of one step: ``start()``, then ``allowed(state)`` (a list of token ids, or
    None where decoding is free) and ``advance(state, token)`` per generated token; ``finish(state)`` at the
    token budget. ``state.action`` is the chosen action (env spelling) once one is complete."""

    def __init__(self, tokenizer: Any, actions: list[str], *, eos_ids: list[int], fmt: str = "plain",
                 env_name: str = "env", trie: ActionTrie | None = None, slots: bool = False):
        if fmt not in ("plain", "think-action"):
            raise ValueError(f"unknown response format {fmt!r}")
        self.tokenizer, self.fmt = tokenizer, fmt
        self.eos_ids = list(eos_ids)
        self.trie = trie or ActionTrie(tokenizer, actions, env_name,
                                       slot_ids=slot_vocabulary(tokenizer) if slots else None)
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
        if s.phase == "suffix":
            return [s.slot.suffix_ids[s.suffix_pos]]
        if s.phase == "slot":
            return self._slot_allowed(s, remaining)
        ends = (self.eos_ids if self.fmt == "plain" else self.close_ids[:1]) if s.node.action is not None else []
        kids = list(s.node.children)
        if remaining is not None:
            fits = [t for t in kids if 1 + s.node.children[t].to_action <= remaining]
            kids = fits if fits or ends else kids
        return kids + [t for t in ends if t not in s.node.children]

    def _slot_allowed(self, s: DecodeState, remaining: int | None) -> list[int]:
        """Slot tokens, plus the closing token once the slot holds a word; only that token when the budget has
        room for the suffix alone (a slot without a word is cut instead: an empty query is not an action)."""
        slot_ids, close = self.trie.slot_ids, s.slot.suffix_ids[0]
        if not s.slot_word:
            return slot_ids
        if remaining is not None and remaining <= len(s.slot.suffix_ids):
            return [close]
        return self.trie.open_slot_ids(close)

    def _complete_slot(self, s: DecodeState) -> None:
        text = self.tokenizer.decode(s.slot_tokens, skip_special_tokens=True).strip()
        s.action = s.slot.prefix + text + s.slot.suffix
        s.phase = "done" if self.fmt == "plain" else "close"

    def advance(self, s: DecodeState, token: int) -> None:
        s.tokens.append(token)
        if s.phase == "slot":
            if s.slot_word and token == s.slot.suffix_ids[0]:
                if len(s.slot.suffix_ids) == 1:
                    self._complete_slot(s)
                else:
                    s.phase, s.suffix_pos = "suffix", 1
                return
            s.slot_tokens.append(token)
            s.slot_word = s.slot_word or any(ch.isalnum() for ch in self.tokenizer.decode([token]))
            return
        if s.phase == "suffix":
            s.suffix_pos += 1
            if s.suffix_pos >= len(s.slot.suffix_ids):
                self._complete_slot(s)
            return
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
        if child.slot is not None:  # the template's prefix is written: its free text follows
            s.phase, s.slot = "slot", child.slot
            return
        if not child.children and child.action is not None and self.fmt == "plain":
            s.action, s.phase = child.action, "done"  # only EOS could follow: stop here

    def finish(self, s: DecodeState) -> str | None:
        """The action of a response cut at the token budget: complete actions count, partial ones do not."""
        if s.action is None and s.phase in ("action", "close") and s.node.action is not None:
            s.action = s.node.action
        return s.action


class ConstraintCache:
    """Builds :class:`ActionConstraint` objects, reusing tries for admissible lists seen before (bounded);
    ``slots``: ``name[<placeholder>]`` actions are free-text slots (the slot vocabulary is computed once)."""

    def __init__(self, tokenizer: Any, eos_ids: list[int], fmt: str, env_name: str = "env", size: int = 4096,
                 slots: bool = False, budget: int | None = None):
        self.tokenizer, self.eos_ids, self.fmt, self.env_name, self.size = tokenizer, eos_ids, fmt, env_name, size
        #: the response token budget (rollout.max_response_tokens): an admissible list none of whose actions fits
        #: in it is an error naming the budget needed, not a rollout of responses that are all cut
        self.budget = budget
        self._tries: dict[tuple[str, ...], ActionTrie] = {}
        self._slot_ids: list[int] | None = None
        self._open_slot_ids: dict[int, list[int]] = {}
        self.slots = slots

    def get(self, actions: list[str] | None) -> ActionConstraint:
        if not actions:
            raise ActionEncodingError(f"env {self.env_name!r} gave no admissible actions at this step; "
                                      "rollout.decoding=constrained needs them at every step")
        key = tuple(actions)
        trie = self._tries.get(key)
        if trie is None:
            if len(self._tries) >= self.size:
                self._tries.clear()
            if self.slots and self._slot_ids is None and any(TEMPLATE.fullmatch(a) for a in actions):
                self._slot_ids = slot_vocabulary(self.tokenizer)
            trie = ActionTrie(self.tokenizer, list(actions), self.env_name, slot_ids=self._slot_ids,
                              open_cache=self._open_slot_ids)
            if self.budget is not None and trie.root.to_action > self.budget:
                need = trie.root.to_action
                raise ActionEncodingError(
                    f"rollout.max_response_tokens={self.budget} is shorter than every admissible action of env "
                    f"{self.env_name!r} (the shortest takes {need} tokens, e.g. {actions[0]!r}): set "
                    f"rollout.max_response_tokens={need} or more")
            self._tries[key] = trie
        return ActionConstraint(self.tokenizer, list(actions), eos_ids=self.eos_ids, fmt=self.fmt,
                                env_name=self.env_name, trie=trie)
