"""Scripted agents for the dialogue envs' benchmarks: the oracle, an oracle that words its questions in varied
ways (what a sampling LLM does), and naive baselines (the envs are free text, so there is no `random` over
admissible actions)."""

from __future__ import annotations

import random

#: Phrasings per intent; each parses to the same intent under the dialogue grammar (see `check_phrases`).
PHRASES = {
    "day": ("What day would you like?", "Which day works for you?", "When do you want to come?", "On what date?"),
    "people": ("How many people?", "How many guests will there be?", "What size is your party?",
               "For how many people?"),
    "area": ("Which area do you prefer?", "Where would you like to eat?", "Any preferred location?",
             "What part of town?"),
    "price": ("What is your budget?", "What price range?", "How much would you like to spend?",
              "What can you afford?"),
    "class": ("What kind of animal is it?", "What type of animal?", "Is it a mammal or a bird?", "What class?"),
    "habitat": ("Where does it live?", "What is its habitat?", "Where is its home?", "What place does it live in?"),
    "color": ("What color is it?", "What colour is it?", "Which color?", "Tell me its color."),
    "size": ("What size is it?", "Is it big or small?", "How large is it?", "Size?"),
}
OFFER = ("How about {n}?", "Would {n} suit you?", "I suggest {n}.", "What about {n}?")
GUESS = ("Is it the {n}?", "I guess {n}.", "{n}?", "My guess: the {n}.")
BOOK = ("book {n}", "Shall I book {n}? Booking now.", "I will reserve {n}.", "Please confirm: {n}.")


def varied_oracle(env, rng: random.Random) -> str:
    """The oracle's intent, worded with a random phrasing of :data:`PHRASES` / :data:`OFFER` / :data:`BOOK`."""
    action = env.oracle_action()
    intent = env._parse(action)
    if intent.kind == "ask":
        return rng.choice(PHRASES[intent.slot])
    if intent.kind == "book":
        return rng.choice(BOOK).format(n=intent.name)
    return rng.choice(OFFER if hasattr(env, "db") else GUESS).format(n=intent.name)


def naive(env, rng: random.Random) -> str:
    """Booking: book a random listed restaurant at once. Guessing: name a random not-yet-guessed candidate."""
    if hasattr(env, "db"):
        return f"book {rng.choice(env.db).name}"
    left = [n for n in env.candidates if n not in env.guesses]
    return f"Is it the {rng.choice(left)}?"


def random_intent(env, rng: random.Random) -> str:
    """A uniformly random intent: ask a random slot or offer/guess a random option (never books first)."""
    slots = ("day", "people", "area", "price") if hasattr(env, "db") else ("class", "habitat", "color", "size")
    names = [r.name for r in env.db] if hasattr(env, "db") else env.candidates
    if rng.random() < 0.5:
        return rng.choice(PHRASES[rng.choice(slots)])
    n = rng.choice(names)
    if hasattr(env, "db") and env.offers and rng.random() < 0.5:
        return f"book {env.offers[-1]}"
    return (OFFER if hasattr(env, "db") else GUESS)[0].format(n=n)


def epsilon_oracle(epsilon: float):
    """With probability ``epsilon`` a random intent, else the varied oracle."""
    def policy(env, rng: random.Random) -> str:
        return random_intent(env, rng) if rng.random() < epsilon else varied_oracle(env, rng)
    return policy


def check_phrases() -> None:
    """Every phrasing parses to the intent it stands for (run by both benchmark scripts before measuring)."""
    from gigpo.envs.dialogue.booking import SLOT_WORDS as BOOKING
    from gigpo.envs.dialogue.guess import SLOT_WORDS as GUESSING
    from gigpo.envs.dialogue.text import Intent, parse_intent

    for slot, phrases in PHRASES.items():
        words, booking = (BOOKING, True) if slot in BOOKING else (GUESSING, False)
        for p in phrases:
            got = parse_intent(p, words, ["luna"], booking)
            if got != Intent("ask", slot=slot):
                raise AssertionError(f"{p!r} parses as {got}, not a question about {slot}")
    for p in OFFER + GUESS:
        assert parse_intent(p.format(n="luna"), BOOKING, ["luna"], True) == Intent("offer", name="luna"), p
    for p in BOOK:
        assert parse_intent(p.format(n="luna"), BOOKING, ["luna"], True) == Intent("book", name="luna"), p
