"""`dialogue-guess`: an information-seeking game — the user thinks of an animal; ask about it, then name it."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from gigpo.envs.dialogue.base import DialogueEnv, Outcome
from gigpo.envs.dialogue.text import MAX_REPLY_CHARS, Intent, parse_intent, pick

#: The catalog: name -> (class, habitat, color, size). Every attribute tuple is distinct, so any candidate set
#: can be narrowed to one animal by asking all four attributes.
CATALOG: dict[str, tuple[str, str, str, str]] = {
    "fox": ("mammal", "forest", "red", "medium"), "bear": ("mammal", "forest", "brown", "large"),
    "deer": ("mammal", "forest", "brown", "medium"), "squirrel": ("mammal", "forest", "red", "small"),
    "otter": ("mammal", "river", "brown", "medium"), "beaver": ("mammal", "river", "brown", "large"),
    "camel": ("mammal", "desert", "brown", "large"), "goat": ("mammal", "mountain", "white", "medium"),
    "whale": ("mammal", "ocean", "grey", "large"), "seal": ("mammal", "ocean", "grey", "medium"),
    "owl": ("bird", "forest", "brown", "small"), "eagle": ("bird", "mountain", "brown", "large"),
    "heron": ("bird", "river", "grey", "large"), "gull": ("bird", "ocean", "white", "medium"),
    "parrot": ("bird", "forest", "green", "small"), "swan": ("bird", "river", "white", "large"),
    "frog": ("amphibian", "river", "green", "small"), "newt": ("amphibian", "forest", "red", "small"),
    "lizard": ("reptile", "desert", "green", "small"), "snake": ("reptile", "desert", "brown", "medium"),
    "turtle": ("reptile", "ocean", "green", "large"), "crocodile": ("reptile", "river", "green", "large"),
    "salmon": ("fish", "river", "red", "medium"), "shark": ("fish", "ocean", "grey", "large"),
}
ATTRS = ("class", "habitat", "color", "size")
SLOT_WORDS = {
    "class": ("class", "kind", "type", "mammal", "bird", "reptile", "fish", "amphibian", "animal"),
    "habitat": ("habitat", "live", "lives", "where", "home", "place"),
    "color": ("color", "colour", "colored", "coloured"),
    "size": ("size", "big", "large", "small", "tall", "heavy"),
}
_OPEN = ("I'm thinking of an animal. Can you guess which?", "Let's play: I have an animal in mind.",
         "Guess my animal! Ask me anything about it.", "I've picked one of the animals. Your turn to guess.")
_ANSWER = {
    "class": ("It's a {v}.", "It is a {v}.", "My animal is a {v}.", "A {v}."),
    "habitat": ("It lives in the {v}.", "You'd find it in the {v}.", "Its home is the {v}.", "The {v}."),
    "color": ("It's {v}.", "It is mostly {v}.", "The colour is {v}.", "{V}."),
    "size": ("It's {v}-sized.", "I'd call it {v}.", "Size: {v}.", "It is {v}."),
}
_WRONG = ("No, it's not the {name}.", "Not the {name}, sorry.", "Wrong, it isn't a {name}.", "Nope, not {name}.")
_RIGHT = ("Yes! It's the {name}.", "Correct, the {name}!", "You got it: {name}.")
_CONFUSED = ("Hmm? Ask me about my animal, or guess it.", "I don't understand.", "Sorry, what do you mean?")


class GuessEnv(DialogueEnv):
    """The user holds a secret animal among ``n_candidates`` drawn from :data:`CATALOG` (listed, with their
    attributes, in ``info["task"]``) and answers questions about its class, habitat, colour and size.

    * Naming a candidate is a guess: right → done, ``won``, reward = score = ``max(min_score, 1 -
      turn_cost·(turns - 1))`` (fewer turns score higher); wrong → the candidate is ruled out, reward 0.
    * Running out of ``max_turns`` → done, score 0. ``state_key`` = (attributes revealed, guesses made).
    """

    instructions = ("Guess the animal the user is thinking of. Ask one question per reply about its class, "
                    "habitat, color or size, then name the animal from the list.")

    def __init__(self, *, n_candidates: int = 6, max_turns: int = 8, turn_cost: float = 0.1, min_score: float = 0.2,
                 user: str = "rules", user_base_url: str | None = None, user_api_key_env: str | None = None,
                 user_timeout_s: float = 30.0, user_retries: int = 2, user_temperature: float = 0.7,
                 paraphrase_seed: int = 0, max_reply_chars: int = MAX_REPLY_CHARS) -> None:
        if not 2 <= n_candidates <= len(CATALOG):
            raise ValueError(f"n_candidates must be in [2, {len(CATALOG)}]")
        super().__init__(max_turns=max_turns, user=user, user_base_url=user_base_url,
                         user_api_key_env=user_api_key_env, user_timeout_s=user_timeout_s,
                         user_retries=user_retries, user_temperature=user_temperature,
                         paraphrase_seed=paraphrase_seed,
                         max_reply_chars=max_reply_chars)
        self.n_candidates, self.turn_cost, self.min_score = int(n_candidates), float(turn_cost), float(min_score)
        self.candidates: list[str] = []
        self.secret = ""
        self.revealed: set[str] = set()
        self.guesses: list[str] = []

    def _new_episode(self, rng: np.random.Generator) -> str:
        self.candidates = [str(n) for n in rng.choice(sorted(CATALOG), self.n_candidates, replace=False)]
        self.secret = self.candidates[int(rng.integers(self.n_candidates))]
        self.revealed, self.guesses = set(), []
        return "Animals:\n" + "\n".join(f"{n}: {', '.join(CATALOG[n])}" for n in self.candidates)

    def _opening(self, rng: np.random.Generator) -> str:
        return pick(rng, _OPEN)

    def _parse(self, text: str) -> Intent:
        return parse_intent(text, SLOT_WORDS, self.candidates)

    def _state_key(self) -> Hashable:
        return ("guess", tuple(a for a in ATTRS if a in self.revealed), tuple(sorted(self.guesses)))

    def _persona(self) -> str:
        attrs = ", ".join(f"{a} {v}" for a, v in zip(ATTRS, CATALOG[self.secret]))
        return (f"You are playing a guessing game. Your secret animal is the {self.secret} ({attrs}). Answer the "
                f"other player's questions truthfully and briefly; never say the animal's name unless it is guessed.")

    def _respond(self, intent: Intent, rng: np.random.Generator) -> Outcome:
        if intent.kind == "ask":
            v = CATALOG[self.secret][ATTRS.index(intent.slot)]
            self.revealed.add(intent.slot)
            return Outcome(pick(rng, _ANSWER[intent.slot], v=v, V=v.capitalize()))
        if intent.kind == "offer":
            if intent.name == self.secret:
                score = max(self.min_score, 1.0 - self.turn_cost * (self._turn - 1))
                return Outcome(pick(rng, _RIGHT, name=intent.name), reward=score, done=True, won=True, score=score)
            if intent.name not in self.guesses:
                self.guesses.append(intent.name)
            return Outcome(pick(rng, _WRONG, name=intent.name))
        return Outcome(pick(rng, _CONFUSED), valid=False)

    def consistent(self) -> list[str]:
        """Candidates not yet ruled out by the revealed attributes and the wrong guesses."""
        secret = CATALOG[self.secret]
        return [n for n in self.candidates if n not in self.guesses
                and all(CATALOG[n][i] == secret[i] for i, a in enumerate(ATTRS) if a in self.revealed)]

    def oracle_action(self) -> str:
        """Name the animal once one candidate is left; else ask the unrevealed attribute that splits the
        remaining candidates into the most distinct values (ties: :data:`ATTRS` order)."""
        left = self.consistent()
        if len(left) == 1:
            return f"Is it the {left[0]}?"
        todo = [a for a in ATTRS if a not in self.revealed]
        if not todo:
            return f"Is it the {left[0]}?"
        best = max(todo, key=lambda a: (len({CATALOG[n][ATTRS.index(a)] for n in left}), -ATTRS.index(a)))
        return {"class": "What kind of animal is it?", "habitat": "Where does it live?",
                "color": "What color is it?", "size": "What size is it?"}[best]
