"""`dialogue-booking`: a task-oriented conversation — gather the customer's slots, offer a restaurant, book it."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from gigpo.envs.dialogue.base import DialogueEnv, Outcome
from gigpo.envs.dialogue.text import MAX_REPLY_CHARS, Intent, parse_intent, pick

DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
AREAS = ("north", "south", "east", "west", "centre")
PRICES = ("cheap", "moderate", "expensive")  # ordered: a budget of "moderate" allows cheap and moderate
NAMES = ("luna", "basil", "olive", "saffron", "juniper", "copper", "harbor", "maple", "cedar", "ember", "willow",
         "ginger", "pepper", "quince", "sage", "clove", "thyme", "fennel", "coral", "amber")
#: Slot -> the keywords that ask about it (grammar rule 3).
SLOT_WORDS = {
    "day": ("day", "date", "when", "weekday"),
    "people": ("people", "persons", "party", "guests", "many", "size"),
    "area": ("area", "where", "part", "location", "district", "neighbourhood", "neighborhood"),
    "price": ("price", "budget", "cost", "afford", "spend", "pricey"),
}
SLOTS = tuple(SLOT_WORDS)

_OPEN = ("Hi, I'd like to book a table at a restaurant.", "Hello! Can you help me reserve a table?",
         "Good evening, I'm looking to book somewhere to eat.", "Hi there, I need a restaurant booking.")
_ANSWER = {
    "day": ("It's for {day}.", "We'd like to go on {day}.", "{Day}, please.", "I was thinking {day}."),
    "people": ("There will be {people} of us.", "A table for {people}, please.", "We are {people} people.",
               "{people} people in total."),
    "area": ("Ideally the {area}, but I don't mind another area if needed.", "I'd prefer the {area}; other areas "
             "are fine too.", "Somewhere in the {area} would be nice, though it's not essential."),
    "price": ("It must be {price} or cheaper.", "My budget is {price} at most.", "Nothing above {price}, please.",
              "I can only afford {price} or less."),
}
_AGAIN = ("As I said, {fact}", "I already told you: {fact}", "Like I mentioned, {fact}")
_CONFUSED = ("Sorry, I didn't follow that.", "I'm not sure what you mean.", "Could you say that differently?",
             "Pardon?")
_NO_OFFER = ("Which restaurant would you like to book?", "Book what? You haven't suggested anywhere yet.")
_GOOD = ("{Name} sounds good.", "{Name} could work for me.", "Yes, {name} would be fine.")
_GOOD_OTHER_AREA = ("{Name} is not in the {area}, but that would be okay.",
                    "It's not my preferred area, but {name} works.")
_BOOKED = ("Great, thank you for booking {name}!", "Perfect, {name} it is. Thanks!", "Wonderful, see you at {name}.")
_GIVE_UP = " This isn't working, goodbye."
_WHY_NOT = {
    "day": "{name} isn't open on {day}.",
    "people": "{name} can't seat {people} people.",
    "price": "{name} is too expensive for my budget of {price}.",
}
_SAID_BEFORE = ("But I told you that. ", "I already said so. ", "")


@dataclass(frozen=True)
class Restaurant:
    name: str
    area: str
    price: str
    days: tuple[str, ...]
    max_party: int

    def line(self) -> str:
        return (f"{self.name}: {self.area}, {self.price}, open {' '.join(d[:3] for d in self.days)}, "
                f"seats up to {self.max_party}")


class BookingEnv(DialogueEnv):
    """The customer wants a table: ``day``, ``people`` and ``price`` (a budget ceiling, the hard constraint) must
    all be met; ``area`` is a preference (the flexible constraint). It reveals a slot only when asked.

    * Database: ``n_restaurants`` drawn from the seed (listed in ``info["task"]``); the goal is built from one of
      them, so a booking meeting every constraint, preferred area included, always exists.
    * Offer ``NAME``: accepted when it meets the hard constraints (or the user, checking, reveals the one it
      breaks: no penalty if it had not been said yet, ``offer_penalty`` if it had); the user gives up after
      ``max_bad_offers`` bad offers or bookings.
    * ``book [NAME]``: books NAME (or the last offer). Meets every hard constraint → done, ``won``; reward
      ``1`` in the preferred area, ``1 - area_penalty`` elsewhere (= ``score``). Else it counts as a bad offer.
    * Every valid turn costs ``turn_penalty``. ``state_key`` = (revealed slots, offers made, booked?).
    """

    instructions = ("You are a booking assistant talking with a customer. One question per reply: ask about the "
                    "day, the number of people, the area and the price range. Offer a restaurant from the list "
                    "by name, then say 'book NAME' to complete the booking.")

    def __init__(self, *, n_restaurants: int = 6, max_turns: int = 10, turn_penalty: float = 0.02,
                 offer_penalty: float = 0.1, area_penalty: float = 0.2, max_bad_offers: int = 3,
                 user: str = "rules", user_base_url: str | None = None, user_api_key_env: str | None = None,
                 user_timeout_s: float = 30.0, user_retries: int = 2, user_temperature: float = 0.7,
                 paraphrase_seed: int = 0, max_reply_chars: int = MAX_REPLY_CHARS) -> None:
        if not 2 <= n_restaurants <= len(NAMES):
            raise ValueError(f"n_restaurants must be in [2, {len(NAMES)}]")
        super().__init__(max_turns=max_turns, user=user, user_base_url=user_base_url,
                         user_api_key_env=user_api_key_env, user_timeout_s=user_timeout_s,
                         user_retries=user_retries, user_temperature=user_temperature,
                         paraphrase_seed=paraphrase_seed,
                         max_reply_chars=max_reply_chars)
        self.n_restaurants, self.max_bad_offers = int(n_restaurants), int(max_bad_offers)
        self.turn_penalty, self.offer_penalty, self.area_penalty = turn_penalty, offer_penalty, area_penalty
        self.db: list[Restaurant] = []
        self.goal: dict[str, object] = {}
        self.revealed: set[str] = set()
        self.offers: list[str] = []
        self.bad_offers = 0
        self.booked: str | None = None

    def _new_episode(self, rng: np.random.Generator) -> str:
        names = rng.choice(NAMES, self.n_restaurants, replace=False)
        self.db = []
        for n in names:
            days = tuple(d for d in DAYS if rng.random() < 0.5) or (DAYS[int(rng.integers(7))],)
            self.db.append(Restaurant(str(n), AREAS[int(rng.integers(5))], PRICES[int(rng.integers(3))], days,
                                      int(rng.integers(2, 9))))
        target = self.db[int(rng.integers(len(self.db)))]
        self.goal = {"day": target.days[int(rng.integers(len(target.days)))],
                     "people": int(rng.integers(2, target.max_party + 1)),
                     "area": target.area, "price": PRICES[int(rng.integers(PRICES.index(target.price), 3))]}
        self.revealed, self.offers, self.bad_offers, self.booked = set(), [], 0, None
        return "Restaurants:\n" + "\n".join(r.line() for r in self.db)

    def _opening(self, rng: np.random.Generator) -> str:
        return pick(rng, _OPEN)

    def _parse(self, text: str) -> Intent:
        return parse_intent(text, SLOT_WORDS, [r.name for r in self.db], booking=True)

    def _state_key(self) -> Hashable:
        return ("booking", tuple(s for s in SLOTS if s in self.revealed), tuple(sorted(set(self.offers))),
                self.booked)

    def _persona(self) -> str:
        g = self.goal
        return (f"You are a customer phoning a restaurant booking assistant. You want a table on {g['day']} for "
                f"{g['people']} people, price range {g['price']} or cheaper (a must), preferably in the {g['area']} "
                f"(not essential). Reveal a detail only when asked. Reply in one or two short sentences.")

    def violations(self, r: Restaurant) -> list[str]:
        """The hard constraints ``r`` breaks, in slot order."""
        g = self.goal
        bad = []
        if g["day"] not in r.days:
            bad.append("day")
        if int(g["people"]) > r.max_party:
            bad.append("people")
        if PRICES.index(r.price) > PRICES.index(str(g["price"])):
            bad.append("price")
        return bad

    def _fields(self, name: str = "") -> dict[str, object]:
        g = self.goal
        return {"day": g["day"], "Day": str(g["day"]).capitalize(), "people": g["people"], "area": g["area"],
                "price": g["price"], "name": name, "Name": name.capitalize()}

    def _respond(self, intent: Intent, rng: np.random.Generator) -> Outcome:
        cost = -self.turn_penalty
        if intent.kind == "ask":
            fact = pick(rng, _ANSWER[intent.slot], **self._fields())
            if intent.slot in self.revealed:
                fact = pick(rng, _AGAIN, fact=fact[0].lower() + fact[1:])
            self.revealed.add(intent.slot)
            return Outcome(fact, reward=cost)
        if intent.kind == "other":
            return Outcome(pick(rng, _CONFUSED), valid=False)
        name = intent.name or (self.offers[-1] if self.offers else None)
        if name is None:
            return Outcome(pick(rng, _NO_OFFER), reward=cost)
        r = next(x for x in self.db if x.name == name)
        self.offers.append(name)
        bad = self.violations(r)
        if bad:
            said = [s for s in bad if s in self.revealed]
            penalty = self.offer_penalty if (said or intent.kind == "book") else 0.0
            self.bad_offers += 1 if penalty else 0
            self.revealed.update(bad)
            why = " ".join(_WHY_NOT[s].format(**self._fields(name)) for s in bad)
            lead = pick(rng, _SAID_BEFORE) if said else ""
            out = Outcome(f"{lead}No, {why[0].lower()}{why[1:]}", reward=cost - penalty, extra={"violated": bad})
            if self.bad_offers >= self.max_bad_offers:
                out.done, out.convey, out.extra["gave_up"] = True, out.convey + _GIVE_UP, "bad offers"
            return out
        if intent.kind == "offer":
            tmpl = _GOOD if r.area == self.goal["area"] else _GOOD_OTHER_AREA
            return Outcome(pick(rng, tmpl, **self._fields(name)), reward=cost)
        self.booked = name
        score = 1.0 if r.area == self.goal["area"] else 1.0 - self.area_penalty
        return Outcome(pick(rng, _BOOKED, **self._fields(name)), reward=cost + score, done=True, won=True,
                       score=score, extra={"booked": name})

    def oracle_action(self) -> str:
        """Ask each unrevealed slot in order, then offer the first restaurant meeting every constraint (preferred
        area first), then book it."""
        for s in SLOTS:
            if s not in self.revealed:
                return {"day": "What day would you like?", "people": "How many people?",
                        "area": "Which area do you prefer?", "price": "What is your budget?"}[s]
        fits = [r for r in self.db if not self.violations(r)]
        best = sorted(fits, key=lambda r: r.area != self.goal["area"])[0]
        if self.offers and self.offers[-1] == best.name:
            return f"book {best.name}"
        return f"How about {best.name}?"
